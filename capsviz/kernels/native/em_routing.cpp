// EM routing for matrix-capsule layers, votes and all EM iterations fused per image.
//
// The PyTorch path (capsviz/routing.py `_em`) makes every step a full pass over a vote tensor of
// ~0.8M floats per small-config image, in memory. Here one image's votes are made once, routed
// through every iteration and dropped while they sit in this core's cache (2 MB for the small
// config's ConvCaps1): the same arithmetic as `_em` (same formulas, same floors and clamps; only
// summation order differs). When gradients are wanted the forward keeps a trace per image (R,
// moments and costs per iteration), and the backward pass makes the votes again and unrolls
// every iteration in reverse from it, nothing detached, as autograd does through `_em`. Built
// and loaded by capsviz/native/__init__.py; plain C++ with OpenMP over images, no PyTorch
// headers. Results do not depend on the threads: each image's outputs are its own, and the
// gradients summed over images (W's, the betas') are added in image order.
//
// Layouts (all float32, contiguous): poses (B, L, 16) and a_in (B, L), the L lower capsules as
// the layer below left them; lower (P, I), which lower capsule sits in receptive-field slot i of
// position p (each lower capsule's assignments are normalised over every (p, j) it reaches).
// I is a multiple of 16; slots from I_real on are padding, with zero pose and activation and
// lower index L, a lower capsule of their own. The kernel gathers each image's slots itself,
// into (P, 16, I) with slots innermost so that loops run over VL slots at a time: no unfolded
// copy of the poses is made outside it. W (J, 16, I), the 4x4 transform of slot i for upper
// capsule j; offset (16, I) or null, added to every vote of slot i (coordinate addition).
// Outputs a (B, P, J) and mu (B, P, J, 16).
//
// As in the PyTorch path, votes are divided by a per-image bound on their size and centred on
// each upper capsule's unweighted mean vote before any moment is taken (float32 stays finite
// for huge poses); variances are floored at var_floor in true units.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace {

constexpr int H = 16;
constexpr float EPS = 1e-8f;
// The backward pass keeps each image's share of the gradients of W and the betas apart until
// it adds them in image order (see capsviz_em_routing_backward): the floats of at most this
// many shares at once (32 MB), and SUM_BLOCK elements of the sums added at a time.
constexpr int64_t GROUP_FLOATS = int64_t(1) << 23;
constexpr int64_t SUM_BLOCK = 1024;

// VL lower capsules' values of one pose entry: one vector register, as wide as the CPU has
// (AVX-512: 16 floats, AVX2: 8, else 4). A vector type wider than the hardware's is split by the
// compiler through the stack, several times slower. Every hot loop runs over receptive-field
// slots i, VL at a time; slots are padded to a multiple of 16, which every VL divides.
#if defined(__AVX512F__)
constexpr int VL = 16;
#elif defined(__AVX__)
constexpr int VL = 8;
#else
constexpr int VL = 4;
#endif
typedef float vf __attribute__((vector_size(4 * VL), aligned(4)));
typedef int32_t vi __attribute__((vector_size(4 * VL), aligned(4)));

inline vf load(const float* p) { return *reinterpret_cast<const vf*>(p); }
inline void store(float* p, vf x) { *reinterpret_cast<vf*>(p) = x; }
inline vf splat(float x) { return vf{} + x; }

// The sum of a vector's lanes, pairwise, in registers (a copy through memory cost a tenth of
// the forward: the M-step sums two vectors per pose entry). Halves come from the x86 intrinsics
// every compiler has, not __builtin_shufflevector (clang, GCC 12+ only), so GCC 9+ and clang build it.
typedef float v4 __attribute__((vector_size(16), aligned(4)));
#if defined(__SSE__)
inline float total4(v4 x) {
    const v4 y = (v4)_mm_add_ps((__m128)x, _mm_movehl_ps((__m128)x, (__m128)x));  // (x0 + x2, x1 + x3, ..)
    return y[0] + y[1];
}
#else
inline float total4(v4 x) { return (x[0] + x[2]) + (x[1] + x[3]); }
#endif
#if defined(__AVX__)
inline float total8(__m256 y) { return total4((v4)_mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1))); }
#endif
#if defined(__AVX512F__)
inline float total(vf x) {
    const __m512 m = (__m512)x;
    return total8(_mm256_add_ps(_mm512_castps512_ps256(m), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(m), 1))));
}
#elif defined(__AVX__)
inline float total(vf x) { return total8((__m256)x); }
#else
inline float total(vf x) { return total4(x); }
#endif
inline vf vmax(vf a, vf b) { return a > b ? a : b; }

// The largest |x| of n floats, n a multiple of VL (every array here is padded to 16 slots).
float abs_max(const float* x, int64_t n) {
    vf m{};
    for (int64_t k = 0; k < n; k += VL) m = vmax(m, vmax(load(x + k), -load(x + k)));
    float most = 0;
    for (int k = 0; k < VL; ++k) most = std::max(most, m[k]);
    return most;
}

// exp for x <= 0 (logits less their lower capsule's peak): 2^k e^r with |r| <= ln2 / 2 and a
// degree-6 Taylor polynomial, relative error ~1e-7; below -87 (e^x < 2e-38) it returns ~e^-87.
inline vf exp_nonpositive(vf x) {
    x = x < -87.0f ? splat(-87.0f) : x;
    const vf t = x * 1.44269504f + 0.5f;
    vf k = __builtin_convertvector(__builtin_convertvector(t, vi), vf);
    k = k > t ? k - 1.0f : k;  // floor(t): the round-to-nearest k of x / ln2
    const vf r = x - k * 0.693147181f;
    vf p = splat(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const vi bits = (__builtin_convertvector(k, vi) + 127) << 23;
    vf two_k;
    __builtin_memcpy(&two_k, &bits, sizeof two_k);
    return p * two_k;
}

inline float log_sigmoid(float x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

struct Layer {
    const float *poses, *W, *offset, *a_in, *beta_u, *beta_a;
    const int64_t* lower;
    int64_t P, I, I_real, J, L;
    float var_floor, w_max;
    int iterations;
    const float* lambdas;
};

// Votes of one position p, laid out V[j][h][i] (h = x * 4 + z, the entry of the 4x4 vote):
// V = (pose[p, i] @ W[i, j] + offset[i]) / scale - centre[p, j], centre the mean over real slots.
// With centred false, V keeps the votes uncentred and its readers subtract the centre as they
// load them (the same float operation, so the same values): a pass over V less.
void make_votes(const Layer& g, const float* pose, float inv_scale, float* V, float* centre, bool centred = true) {
    const int64_t I = g.I, J = g.J;  // pose: position p's slots (16, I)
    for (int64_t j = 0; j < J; ++j) {
        const float* w = g.W + j * H * I;  // (16, I)
        for (int x = 0; x < 4; ++x) {  // row x of the vote, 4 entries from one load of pose row x
            const float* px = pose + 4 * x * I;
            float* v = V + (j * H + 4 * x) * I;
            vf sum[4] = {};
            for (int64_t i = 0; i < I; i += VL) {
                const vf p0 = load(px + i), p1 = load(px + I + i), p2 = load(px + 2 * I + i), p3 = load(px + 3 * I + i);
                for (int z = 0; z < 4; ++z) {
                    vf s = p0 * load(w + z * I + i) + p1 * load(w + (4 + z) * I + i) + p2 * load(w + (8 + z) * I + i) +
                           p3 * load(w + (12 + z) * I + i);
                    if (g.offset) s += load(g.offset + (4 * x + z) * I + i);
                    s *= inv_scale;
                    sum[z] += s;
                    store(v + z * I + i, s);
                }
            }
            for (int z = 0; z < 4; ++z) {
                const float c = total(sum[z]) / g.I_real;  // padded slots vote exactly 0
                if (centred)
                    for (int64_t i = 0; i < I; i += VL) store(v + z * I + i, load(v + z * I + i) - c);
                centre[j * H + 4 * x + z] = c;
            }
        }
    }
}

// What one image's routing computed, per iteration t: what the backward pass reads. It lives in
// a caller's buffer (trace_size floats per image) when gradients will be wanted, else in the
// thread's own storage; V, norm, wt and the gathered slots are scratch.
struct Trace {
    float *R, *M1, *q, *S, *Ld, *la, *dev, *sd, *centre, *meta;  // meta: scale, floor, log scale
    std::vector<float> own, V, norm, wt, pose, a;  // pose (P, 16, I), a (P, I): one image's slots
    float* R_at(const Layer& g, int t) const { return R + t * g.P * g.J * g.I; }  // (P, J, I); t = 0 unused
    float* pj(float* x, const Layer& g, int t, int64_t width = 1) const { return x + t * g.P * g.J * width; }
    static int64_t size(int64_t P, int64_t I, int64_t J, int T) { return T * P * J * (I + 2 * H + 4) + T * P + P * J * H + 3; }
    void bind(const Layer& g, float* base) {
        const int64_t P = g.P, I = g.I, J = g.J, T = g.iterations;
        if (!base) {
            own.resize(size(P, I, J, T));
            base = own.data();
        }
        R = base;
        M1 = R + T * P * J * I;
        q = M1 + T * P * J * H;
        S = q + T * P * J * H;
        Ld = S + T * P * J;
        la = Ld + T * P * J;
        dev = la + T * P * J;
        sd = dev + T * P * J;
        centre = sd + T * P;
        meta = centre + P * J * H;
    }
};

// One image's slots gathered from its lower capsules: pose (P, 16, I) and a (P, I), padding zero.
void gather(const Layer& g, int64_t b, Trace& tr) {
    const int64_t P = g.P, I = g.I, L = g.L;
    tr.pose.resize(P * H * I);
    tr.a.resize(P * I);
    for (int64_t p = 0; p < P; ++p) {
        float* pose = tr.pose.data() + p * H * I;
        float* a = tr.a.data() + p * I;
        for (int64_t i = 0; i < g.I_real; ++i) {
            const int64_t l = g.lower[p * I + i];
            const float* src = g.poses + (b * L + l) * H;
            for (int h = 0; h < H; ++h) pose[h * I + i] = src[h];
            a[i] = g.a_in[b * L + l];
        }
        for (int64_t i = g.I_real; i < I; ++i) {
            for (int h = 0; h < H; ++h) pose[h * I + i] = 0.0f;
            a[i] = 0.0f;
        }
    }
}

// One image, forward. The votes V (P, J, 16, I) are made in the first iteration and kept for the
// others (making them again cost 20% more time); the assignments R (P, J, I) live for the whole
// image, because a lower capsule's softmax spans positions.
void route_image(const Layer& g, int64_t b, Trace& tr) {
    const int64_t P = g.P, I = g.I, J = g.J, L = g.L;
    const int T = g.iterations;
    gather(g, b, tr);
    tr.V.resize(P * J * H * I);
    tr.norm.resize(2 * (L + 1));  // lower capsule L: the padding slots
    tr.wt.resize(2 * I);
    float* wt = tr.wt.data();
    float* most = wt + I;  // per slot: the largest logit over j, then the sum of exp over j
    float* peak = tr.norm.data();
    float* Z = peak + L + 1;
    // |vote - centre| <= 2 (4 max|pose| max|W| + max|offset|): the image's scale, at least 1.
    // The largest pose in a receptive field: lower capsules in none (a border) don't count.
    const float pose_max = abs_max(tr.pose.data(), P * H * I), off_max = g.offset ? abs_max(g.offset, H * I) : 0.0f;
    const float scale = std::max(8 * pose_max * g.w_max + 2 * off_max, 1.0f);
    // the floor in scaled units, never below FLOOR_SCALED (routing.py: 1/sig2's gradient must stay finite)
    const float floor_ = std::max(g.var_floor / (scale * scale), 1e-12f), log_scale = std::log(scale);
    tr.meta[0] = scale, tr.meta[1] = floor_, tr.meta[2] = log_scale;

    for (int t = 0; t < T; ++t) {
        const float lam = g.lambdas[t];
        const bool last = t == T - 1;
        const float* Rt = tr.R_at(g, t);
        float* Rn = last ? nullptr : tr.R_at(g, t + 1);
        float *M1 = tr.pj(tr.M1, g, t, H), *q = tr.pj(tr.q, g, t, H);
        float *S = tr.pj(tr.S, g, t), *Ld = tr.pj(tr.Ld, g, t), *la = tr.pj(tr.la, g, t), *dev = tr.pj(tr.dev, g, t);
        std::fill(peak, peak + L + 1, -std::numeric_limits<float>::infinity());
        for (int64_t p = 0; p < P; ++p) {
            float* V = tr.V.data() + p * J * H * I;
            const float* centre = tr.centre + p * J * H;
            if (t == 0) make_votes(g, tr.pose.data() + p * H * I, 1.0f / scale, V, tr.centre + p * J * H, false);
            const float* a = tr.a.data() + p * I;
            // M-step for each upper capsule j; the first one with uniform assignments 1/J.
            for (int64_t j = 0; j < J; ++j) {
                const int64_t pj = p * J + j;
                const float* r = Rt + pj * I;
                vf sv{};
                for (int64_t i = 0; i < I; i += VL) {
                    const vf w = t == 0 ? load(a + i) * (1.0f / J) : load(r + i) * load(a + i);
                    store(wt + i, w);
                    sv += w;
                }
                const float s = total(sv);
                const float scale_w = 1.0f / (s + EPS);
                const float* v = V + j * H * I;
                for (int x = 0; x < 4; ++x) {  // four pose entries per pass over the weights
                    const float* vx = v + 4 * x * I;
                    const float* cx = centre + j * H + 4 * x;
                    vf m1[4] = {}, m2[4] = {};
                    for (int64_t i = 0; i < I; i += VL) {
                        const vf w = load(wt + i);
                        for (int z = 0; z < 4; ++z) {
                            const vf vi = load(vx + z * I + i) - cx[z];
                            m1[z] += w * vi;
                            m2[z] += w * vi * vi;
                        }
                    }
                    for (int z = 0; z < 4; ++z) {
                        const float mean = total(m1[z]) * scale_w;
                        M1[pj * H + 4 * x + z] = mean;
                        q[pj * H + 4 * x + z] = total(m2[z]) * scale_w - mean * mean;
                    }
                }
                double prod[2] = {1.0, 1.0};  // sig2 products of 8 entries each: 2 logs, not 16
                for (int h = 0; h < H; ++h) prod[h >> 3] *= std::max(q[pj * H + h], 0.0f) + floor_;  // >= 1e-96: sig2 >= the floor, 1e-12
                Ld[pj] = float(std::log(prod[0]) + std::log(prod[1]));  // sum over h of log sig2
                S[pj] = s;
                // the cost: sum over h of beta_u + log sigma_h (true units), times S; standardised below
                la[pj] = (H * (g.beta_u[j] + log_scale) + 0.5f * Ld[pj]) * s;
            }
            // Standardise the costs across the J capsules competing at this position.
            float* c = la + p * J;
            double mean = 0, var = 0;
            for (int64_t j = 0; j < J; ++j) mean += c[j];
            mean /= J;
            for (int64_t j = 0; j < J; ++j) var += (c[j] - mean) * (c[j] - mean);
            const float sd = std::sqrt(var / J) + 1e-6f;
            tr.sd[t * P + p] = sd;
            for (int64_t j = 0; j < J; ++j) {
                dev[p * J + j] = c[j] - float(mean);
                c[j] = lam * (g.beta_a[j] - dev[p * J + j] / sd);
            }
            if (last) continue;
            // E-step logits: log-probability of each vote under each upper capsule's Gaussian.
            const int64_t* low = g.lower + p * I;
            for (int64_t i = 0; i < I; i += VL) store(most + i, splat(-std::numeric_limits<float>::infinity()));
            for (int64_t j = 0; j < J; ++j) {
                const int64_t pj = p * J + j;
                const float* m = M1 + pj * H;
                const float* v = V + j * H * I;
                const float* cj = centre + j * H;
                float* r = Rn + pj * I;
                float inv[H];
                for (int h = 0; h < H; ++h) inv[h] = 1.0f / (std::max(q[pj * H + h], 0.0f) + floor_);
                const float base = log_sigmoid(c[j]) - 0.5f * Ld[pj];
                for (int64_t i = 0; i < I; i += VL) {
                    vf qq{};
                    #pragma GCC unroll 16
                    for (int h = 0; h < H; ++h) {
                        const vf d = (load(v + h * I + i) - cj[h]) - m[h];
                        qq += d * d * inv[h];
                    }
                    qq = qq < 1e30f ? qq : splat(1e30f);
                    const vf logit = base - 0.5f * qq;
                    store(r + i, logit);
                    store(most + i, vmax(load(most + i), logit));
                }
            }
            for (int64_t i = 0; i < I; ++i) peak[low[i]] = std::max(peak[low[i]], most[i]);
        }
        if (last) break;
        // Each lower capsule's softmax over every (p, j) it reaches.
        std::fill(Z, Z + L + 1, 0.0f);
        for (int64_t p = 0; p < P; ++p) {
            const int64_t* low = g.lower + p * I;
            for (int64_t i = 0; i < I; ++i) wt[i] = peak[low[i]];
            for (int64_t i = 0; i < I; i += VL) store(most + i, vf{});
            for (int64_t j = 0; j < J; ++j) {
                float* r = Rn + (p * J + j) * I;
                for (int64_t i = 0; i < I; i += VL) {
                    const vf e = exp_nonpositive(load(r + i) - load(wt + i));
                    store(r + i, e);
                    store(most + i, load(most + i) + e);  // this position's share of each Z
                }
            }
            for (int64_t i = 0; i < I; ++i) Z[low[i]] += most[i];
        }
        for (int64_t l = 0; l <= L; ++l) Z[l] = 1.0f / Z[l];
        for (int64_t p = 0; p < P; ++p) {
            const int64_t* low = g.lower + p * I;
            for (int64_t i = 0; i < I; ++i) wt[i] = Z[low[i]];
            for (int64_t j = 0; j < J; ++j) {
                float* r = Rn + (p * J + j) * I;
                for (int64_t i = 0; i < I; i += VL) store(r + i, load(r + i) * load(wt + i));
            }
        }
    }
}

// Gradients of one position's votes (gV[j][h][i], scaled units) into the poses and transforms:
// V = (pose @ W) / scale + const, so gpose = gV W^T / scale and gW = pose^T gV / scale.
void votes_backward(const Layer& g, const float* pose, int64_t j, float inv_scale, const float* gV, float* gpose, float* gW) {
    const int64_t I = g.I;
    const float* w = g.W + j * H * I;
    float* gw = gW + j * H * I;
    for (int64_t i = 0; i < I; i += VL) {
        for (int x = 0; x < 4; ++x)
            for (int y = 0; y < 4; ++y) {
                vf acc = load(gpose + (4 * x + y) * I + i);
                const vf pxy = load(pose + (4 * x + y) * I + i) * inv_scale;
                for (int z = 0; z < 4; ++z) {
                    const vf gv = load(gV + (4 * x + z) * I + i);
                    acc += gv * load(w + (4 * y + z) * I + i) * inv_scale;
                    store(gw + (4 * y + z) * I + i, load(gw + (4 * y + z) * I + i) + pxy * gv);
                }
                store(gpose + (4 * x + y) * I + i, acc);
            }
    }
}

struct Grads {
    const float *gA, *gMu;         // (B, P, J), (B, P, J, 16)
    float *gposes, *ga_in;         // (B, L, 16), (B, L)
};

// One image, backward through every unrolled iteration (nothing detached), from its trace.
// gW (J, 16, I), gbu, gba (J) accumulate this image's share, from zero.
void backward_image(const Layer& g, int64_t b, Trace& tr, const Grads& gr, float* gW, float* gbu, float* gba,
                    std::vector<float>& work) {
    const int64_t P = g.P, I = g.I, J = g.J, L = g.L;
    const int T = g.iterations;
    work.resize(P * J * I + 2 * P * J * H + 2 * P * J + P * J * H * I + L + 1 + 3 * I + P * H * I + P * I);
    float* gR = work.data();                 // (P, J, I): gradient of R_t
    float* gM1 = gR + P * J * I;             // (P, J, H)
    float* gs2 = gM1 + P * J * H;            // (P, J, H)
    float* gla = gs2 + P * J * H;            // (P, J)
    float* gLd = gla + P * J;                // (P, J)
    float* gVall = gLd + P * J;              // (P, J, H, I): gradient of the votes, summed over iterations
    float* G = gVall + P * J * H * I;        // (L + 1): per lower capsule, sum of R gR
    float* wt = G + L + 1;                   // (I)
    float* gw = wt + I;                      // (I)
    float* gQ = gw + I;                      // (I)
    float* gpose = gQ + I;                   // (P, 16, I): gradients of the gathered slots
    float* ga = gpose + P * H * I;           // (P, I)
    std::fill(gpose, gpose + P * H * I, 0.0f);
    std::fill(ga, ga + P * I, 0.0f);
    std::fill(gVall, gVall + P * J * H * I, 0.0f);
    const float scale = tr.meta[0], inv_scale = 1.0f / scale, floor_ = tr.meta[1], log_scale = tr.meta[2];
    // every position's votes, made once for all iterations (the trace keeps their centres)
    gather(g, b, tr);
    tr.V.resize(P * J * H * I);
    for (int64_t p = 0; p < P; ++p) make_votes(g, tr.pose.data() + p * H * I, inv_scale, tr.V.data() + p * J * H * I, tr.centre + p * J * H);

    // From the outputs: a = sigmoid(la_{T-1}), mu = (M1_{T-1} + centre) * scale.
    {
        const float* la = tr.pj(tr.la, g, T - 1);
        for (int64_t pj = 0; pj < P * J; ++pj) {
            const float a = 1.0f / (1.0f + std::exp(-la[pj]));
            gla[pj] = gr.gA[b * P * J + pj] * a * (1 - a);
            gLd[pj] = 0;
            for (int h = 0; h < H; ++h) {
                gM1[pj * H + h] = gr.gMu[(b * P * J + pj) * H + h] * scale;
                gs2[pj * H + h] = 0;
            }
        }
    }
    for (int t = T - 1; t >= 0; --t) {
        const float lam = g.lambdas[t];
        const float* Rt = tr.R_at(g, t);
        const float *M1 = tr.pj(tr.M1, g, t, H), *q = tr.pj(tr.q, g, t, H);
        const float *S = tr.pj(tr.S, g, t), *Ld = tr.pj(tr.Ld, g, t), *dev = tr.pj(tr.dev, g, t);
        // M-step of iteration t, backward, one position at a time.
        for (int64_t p = 0; p < P; ++p) {
            const float* V = tr.V.data() + p * J * H * I;
            float* gV = gVall + p * J * H * I;
            const float* a = tr.a.data() + p * I;
            // la = lam (beta_a - dev / sd), dev = cost - mean(cost), sd = std(cost) + 1e-6
            const float sd = tr.sd[t * P + p], sigma = sd - 1e-6f;
            float gcost[64], gdev[64];
            double dot = 0, gmean = 0;
            for (int64_t j = 0; j < J; ++j) {
                const float g_la = gla[p * J + j];
                gba[j] += lam * g_la;
                gcost[j] = -lam * g_la;  // dL/dz for now
                dot += double(gcost[j]) * dev[p * J + j];
            }
            const double g_sd = -dot / (double(sd) * sd);
            for (int64_t j = 0; j < J; ++j) {
                gdev[j] = gcost[j] / sd + (sigma > 0 ? float(g_sd * dev[p * J + j] / (double(J) * sigma)) : 0.0f);
                gmean += gdev[j];
            }
            for (int64_t j = 0; j < J; ++j) gcost[j] = gdev[j] - float(gmean / J);
            for (int64_t j = 0; j < J; ++j) {
                const int64_t pj = p * J + j;
                const float s = S[pj];
                gbu[j] += gcost[j] * H * s;
                const float gL = gLd[pj] + gcost[j] * 0.5f * s;
                float gS = gcost[j] * (H * (g.beta_u[j] + log_scale) + 0.5f * Ld[pj]);
                float gm1[H], gm2[H];
                for (int h = 0; h < H; ++h) {
                    const float qh = q[pj * H + h], s2 = std::max(qh, 0.0f) + floor_;
                    const float gq = qh >= 0 ? gs2[pj * H + h] + gL / s2 : 0.0f;  // through max(q, 0)
                    gm2[h] = gq;
                    gm1[h] = gM1[pj * H + h] - 2 * M1[pj * H + h] * gq;
                }
                // M1 = sum_i w V, M2 = sum_i w V^2, w = Rp / (S + eps)
                const float* r = Rt + pj * I;
                const float k = 1.0f / (s + EPS);
                for (int64_t i = 0; i < I; i += VL) {
                    const vf rp = t == 0 ? load(a + i) * (1.0f / J) : load(r + i) * load(a + i);
                    store(wt + i, rp);
                    store(gw + i, vf{});
                }
                const float* v = V + j * H * I;
                float* gv = gV + j * H * I;
                for (int h = 0; h < H; ++h)
                    for (int64_t i = 0; i < I; i += VL) {
                        const vf vi = load(v + h * I + i), w = load(wt + i) * k;
                        store(gw + i, load(gw + i) + gm1[h] * vi + gm2[h] * vi * vi);
                        store(gv + h * I + i, load(gv + h * I + i) + w * (gm1[h] + 2 * gm2[h] * vi));
                    }
                vf gk{};
                for (int64_t i = 0; i < I; i += VL) gk += load(gw + i) * load(wt + i);
                gS += -total(gk) * k * k;
                // gRp = gw k + gS; Rp = R a (t > 0) or a / J
                for (int64_t i = 0; i < I; i += VL) {
                    const vf grp = load(gw + i) * k + gS;
                    if (t == 0) {
                        store(ga + p * I + i, load(ga + p * I + i) + grp * (1.0f / J));
                    } else {
                        store(gR + pj * I + i, grp * load(a + i));
                        store(ga + p * I + i, load(ga + p * I + i) + grp * load(r + i));
                    }
                }
            }
        }
        if (t == 0) break;

        // E-step of iteration t - 1, backward: R_t = softmax over each lower capsule's (p, j) of
        // logit = logsigmoid(la) - Q / 2 - Ld / 2, Q = sum_h (V - M1)^2 / sig2.
        std::fill(G, G + L + 1, 0.0f);
        for (int64_t p = 0; p < P; ++p) {
            const int64_t* low = g.lower + p * I;
            for (int64_t j = 0; j < J; ++j)
                for (int64_t i = 0; i < I; ++i) G[low[i]] += Rt[(p * J + j) * I + i] * gR[(p * J + j) * I + i];
        }
        const int u = t - 1;
        const float *M1u = tr.pj(tr.M1, g, u, H), *qu = tr.pj(tr.q, g, u, H), *lau = tr.pj(tr.la, g, u);
        for (int64_t p = 0; p < P; ++p) {
            const float* V = tr.V.data() + p * J * H * I;
            float* gV = gVall + p * J * H * I;
            const int64_t* low = g.lower + p * I;
            for (int64_t i = 0; i < I; ++i) wt[i] = G[low[i]];
            for (int64_t j = 0; j < J; ++j) {
                const int64_t pj = p * J + j;
                const float* r = Rt + pj * I;
                const float* m = M1u + pj * H;
                const float* v = V + j * H * I;
                float* gv = gV + j * H * I;
                float inv[H];
                for (int h = 0; h < H; ++h) inv[h] = 1.0f / (std::max(qu[pj * H + h], 0.0f) + floor_);
                // gQ (the gradient of Q per slot) first, then one pose entry h at a time: two
                // accumulators live, not 2 x 16 (which spill to the stack)
                vf gsum{};
                for (int64_t i = 0; i < I; i += VL) {
                    const vf glog = load(r + i) * (load(gR + pj * I + i) - load(wt + i));
                    gsum += glog;
                    vf Q{};
                    #pragma GCC unroll 16
                    for (int h = 0; h < H; ++h) {
                        const vf d = load(v + h * I + i) - m[h];
                        Q += d * d * inv[h];
                    }
                    store(gQ + i, Q <= 1e30f ? -0.5f * glog : vf{});
                }
                const float gl = total(gsum);
                gla[pj] = gl / (1.0f + std::exp(lau[pj]));  // d logsigmoid(x) / dx = sigmoid(-x)
                gLd[pj] = -0.5f * gl;
                for (int h = 0; h < H; ++h) {
                    vf gm1{}, gs2h{};
                    for (int64_t i = 0; i < I; i += VL) {
                        const vf d = load(v + h * I + i) - m[h], gd = load(gQ + i) * d;
                        const vf t2 = gd * (2.0f * inv[h]);
                        store(gv + h * I + i, load(gv + h * I + i) + t2);
                        gm1 -= t2;
                        gs2h -= gd * d;
                    }
                    gM1[pj * H + h] = total(gm1);
                    gs2[pj * H + h] = total(gs2h) * inv[h] * inv[h];
                }
            }
        }
    }
    // Every iteration used the same votes: their summed gradient into the poses and transforms, once.
    for (int64_t p = 0; p < P; ++p)
        for (int64_t j = 0; j < J; ++j)
            votes_backward(g, tr.pose.data() + p * H * I, j, inv_scale, gVall + (p * J + j) * H * I, gpose + p * H * I, gW);
    // The slots' gradients back to the lower capsules they were gathered from (this image's own rows).
    float* gposes = gr.gposes + b * L * H;
    float* ga_in = gr.ga_in + b * L;
    std::fill(gposes, gposes + L * H, 0.0f);
    std::fill(ga_in, ga_in + L, 0.0f);
    for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < g.I_real; ++i) {
            const int64_t l = g.lower[p * I + i];
            for (int h = 0; h < H; ++h) gposes[l * H + h] += gpose[(p * H + h) * I + i];
            ga_in[l] += ga[p * I + i];
        }
}

// Real slots name one of the L lower capsules, padding slots L.
bool valid(int64_t B, int64_t P, int64_t I, int64_t I_real, int64_t J, int64_t L, int iterations, const int64_t* lower) {
    if (B < 0 || P < 1 || I_real < 1 || I_real > I || I % 16 != 0 || J < 1 || J > 64 || L < 1 || iterations < 1) return false;
    for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < I; ++i)
            if (i < I_real ? lower[p * I + i] < 0 || lower[p * I + i] >= L : lower[p * I + i] != L) return false;
    return true;
}

// Subnormal floats flushed to zero while a kernel runs, restored after (the threads are PyTorch's
// too). A trained model's sharp assignments reach 1e-40 and below, and on x86 each product with
// one costs ~100 cycles: with the shipped matrix-small's weights a training step ran 27% faster
// with the flush (one interleaved run, 64 MNIST test images).
struct FlushSubnormals {
#if defined(__x86_64__) || defined(__i386__)
    unsigned int saved = _mm_getcsr();
    FlushSubnormals() { _mm_setcsr(saved | 0x8040); }  // FTZ | DAZ
    ~FlushSubnormals() { _mm_setcsr(saved); }
#endif
};

}  // namespace

extern "C" int capsviz_em_routing(const float* poses, const float* W, const float* offset, const float* a_in,
                                  const float* beta_u, const float* beta_a, const int64_t* lower, int64_t B, int64_t P,
                                  int64_t I, int64_t I_real, int64_t J, int64_t L, float var_floor, int iterations,
                                  const float* lambdas, int threads, float* a_out, float* mu_out, float* trace) {
    if (!valid(B, P, I, I_real, J, L, iterations, lower)) return 1;
    const Layer g{poses, W, offset, a_in, beta_u, beta_a, lower, P, I, I_real, J, L, var_floor, abs_max(W, J * H * I), iterations, lambdas};
#pragma omp parallel num_threads(threads)
    {
        const FlushSubnormals flush;
        Trace tr;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < B; ++b) {
            tr.bind(g, trace ? trace + b * Trace::size(P, I, J, iterations) : nullptr);
            route_image(g, b, tr);
            const float* la = tr.pj(tr.la, g, iterations - 1);
            const float* M1 = tr.pj(tr.M1, g, iterations - 1, H);
            for (int64_t pj = 0; pj < P * J; ++pj) {
                a_out[b * P * J + pj] = 1.0f / (1.0f + std::exp(-la[pj]));
                for (int h = 0; h < H; ++h) mu_out[(b * P * J + pj) * H + h] = (M1[pj * H + h] + tr.centre[pj * H + h]) * tr.meta[0];
            }
        }
    }
    return 0;
}

// Floats per image of the trace buffer capsviz_em_routing fills for the backward pass.
extern "C" int64_t capsviz_em_trace_size(int64_t P, int64_t I, int64_t J, int iterations) { return Trace::size(P, I, J, iterations); }

// Gradients of capsviz_em_routing's outputs (a, mu) for the same inputs, unrolled backwards from
// the trace that call filled. Writes gposes (B, L, 16), ga_in (B, L), gW (J, 16, I), gbeta_u
// and gbeta_a (J).
extern "C" int capsviz_em_routing_backward(const float* poses, const float* W, const float* offset, const float* a_in,
                                           const float* beta_u, const float* beta_a, const int64_t* lower, int64_t B,
                                           int64_t P, int64_t I, int64_t I_real, int64_t J, int64_t L, float var_floor,
                                           int iterations, const float* lambdas, int threads, const float* gA,
                                           const float* gMu, float* trace, float* gposes, float* ga_in, float* gW, float* gbu,
                                           float* gba) {
    if (!trace || !valid(B, P, I, I_real, J, L, iterations, lower)) return 1;
    const Layer g{poses, W, offset, a_in, beta_u, beta_a, lower, P, I, I_real, J, L, var_floor, abs_max(W, J * H * I), iterations, lambdas};
    const Grads gr{gA, gMu, gposes, ga_in};
    // Each image's share of gW and the betas is made apart from the others' and added into the
    // sums in image order: every sum is then the same floats whichever thread took which image,
    // whenever it finished, and however many threads there are (bitwise the same training run
    // to run). Shares a thread summed itself and added as threads finished changed the last
    // bits with the timing. The shares of at most GROUP_FLOATS / n images are held at once.
    const int64_t nW = J * H * I, n = nW + 2 * J;  // one image's share: gW, then gbu, gba
    const int64_t group = std::max<int64_t>(1, std::min<int64_t>(B, GROUP_FLOATS / n));
    std::vector<float> shares(group * n), sum(n, 0.0f);
    for (int64_t b0 = 0; b0 < B; b0 += group) {
        const int64_t count = std::min(group, B - b0);
#pragma omp parallel num_threads(threads)
        {
            const FlushSubnormals flush;
            Trace tr;
            std::vector<float> work;
#pragma omp for schedule(dynamic, 1)
            for (int64_t k = 0; k < count; ++k) {
                const int64_t b = b0 + k;
                float* share = shares.data() + k * n;
                std::fill(share, share + n, 0.0f);
                tr.bind(g, trace + b * Trace::size(P, I, J, iterations));
                backward_image(g, b, tr, gr, share, share + nW, share + nW + J, work);
            }
            // The threads split the sums by element, each adding its elements' shares in image
            // order; SUM_BLOCK elements of the sums stay in L1 while the images' shares stream in.
#pragma omp for schedule(static)
            for (int64_t e0 = 0; e0 < n; e0 += SUM_BLOCK) {
                const int64_t e1 = std::min(n, e0 + SUM_BLOCK);
                for (int64_t k = 0; k < count; ++k) {
                    const float* share = shares.data() + k * n;
                    for (int64_t e = e0; e < e1; ++e) sum[e] += share[e];
                }
            }
        }
    }
    std::copy(sum.begin(), sum.begin() + nW, gW);
    std::copy(sum.begin() + nW, sum.begin() + nW + J, gbu);
    std::copy(sum.begin() + nW + J, sum.end(), gba);
    return 0;
}
