// EM routing for matrix-capsule layers, votes and all EM iterations fused per image.
//
// The PyTorch path (capsviz/routing.py `_em`) makes every step a full pass over a vote tensor of
// ~0.8M floats per small-config image, in memory. Here one image's votes are made, routed and
// dropped while they sit in this core's cache: the same arithmetic as `_em` (same formulas, same
// floors and clamps; only summation order differs), with no autograd. Built and loaded by
// capsviz/native/__init__.py; plain C++ with OpenMP over images, no PyTorch headers.
//
// Layouts (all float32, contiguous, slots i innermost so that loops run over 16 slots at a time;
// I a multiple of 16, the slots past I_real padding with zero pose and activation): poses
// (B, P, 16, I); W (J, 16, I), the 4x4 transform of slot i for upper capsule j; offset (16, I)
// or null, added to every vote of slot i (coordinate addition); a_in (B, P, I); lower (P, I),
// which of the L lower capsules sits in slot i of position p: each lower capsule's assignments
// are normalised over every (p, j) it reaches. Outputs a (B, P, J) and mu (B, P, J, 16).
//
// As in the PyTorch path, votes are divided by a per-image bound on their size and centred on
// each upper capsule's unweighted mean vote before any moment is taken (float32 stays finite
// for huge poses); variances are floored at var_floor in true units.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

constexpr int H = 16;
constexpr float EPS = 1e-8f;

// 16 lower capsules' values of one pose entry: one AVX-512 register where there is one (the
// compiler splits it elsewhere). Every hot loop runs over receptive-field slots i, 16 at a time.
typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef float v8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t i16 __attribute__((vector_size(64), aligned(4)));

inline v16 load(const float* p) { return *reinterpret_cast<const v16*>(p); }
inline void store(float* p, v16 x) { *reinterpret_cast<v16*>(p) = x; }
inline v16 splat(float x) { return v16{} + x; }

inline float total(v16 x) {
    v8 lo, hi;
    __builtin_memcpy(&lo, &x, 32);
    __builtin_memcpy(&hi, reinterpret_cast<char*>(&x) + 32, 32);
    const v8 s = lo + hi;
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// exp for x <= 0 (logits less their lower capsule's peak): 2^k e^r with |r| <= ln2 / 2 and a
// degree-6 Taylor polynomial, relative error ~1e-7; below -87 (e^x < 2e-38) it returns ~e^-87.
inline v16 exp_nonpositive(v16 x) {
    x = x < -87.0f ? splat(-87.0f) : x;
    const v16 t = x * 1.44269504f + 0.5f;
    v16 k = __builtin_convertvector(__builtin_convertvector(t, i16), v16);
    k = k > t ? k - 1.0f : k;  // floor(t): the round-to-nearest k of x / ln2
    const v16 r = x - k * 0.693147181f;
    v16 p = splat(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const i16 bits = (__builtin_convertvector(k, i16) + 127) << 23;
    v16 two_k;
    __builtin_memcpy(&two_k, &bits, 64);
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
    float *a_out, *mu_out;
};

// Votes of one position p, laid out V[j][h][i] (h = x * 4 + z, the entry of the 4x4 vote):
// V = (pose[p, i] @ W[i, j] + offset[i]) / scale - centre[p, j], centre the mean over real slots.
// Returns nothing; writes this position's centre (J, 16) in scaled units.
void make_votes(const Layer& g, int64_t b, int64_t p, float inv_scale, float* V, float* centre) {
    const int64_t P = g.P, I = g.I, J = g.J;
    const float* pose = g.poses + (b * P + p) * H * I;  // (16, I)
    for (int64_t j = 0; j < J; ++j) {
        const float* w = g.W + j * H * I;  // (16, I)
        for (int h = 0; h < H; ++h) {
            const int x = h >> 2, z = h & 3;
            float* v = V + (j * H + h) * I;
            v16 sum{};
            for (int64_t i = 0; i < I; i += 16) {
                v16 s = load(pose + (4 * x) * I + i) * load(w + z * I + i) + load(pose + (4 * x + 1) * I + i) * load(w + (4 + z) * I + i) +
                        load(pose + (4 * x + 2) * I + i) * load(w + (8 + z) * I + i) + load(pose + (4 * x + 3) * I + i) * load(w + (12 + z) * I + i);
                if (g.offset) s += load(g.offset + h * I + i);
                s *= inv_scale;
                sum += s;
                store(v + i, s);
            }
            const float c = total(sum) / g.I_real;  // padded slots vote exactly 0
            for (int64_t i = 0; i < I; i += 16) store(v + i, load(v + i) - c);
            centre[j * H + h] = c;
        }
    }
}

// One image. Positions are routed one at a time, their votes made afresh each iteration (4
// multiply-adds per 16 floats) so that they stay in this core's cache; only the assignments R
// (P, J, I) live for the whole image, because a lower capsule's softmax spans positions.
void route_image(const Layer& g, int64_t b, std::vector<float>& V, std::vector<float>& R, std::vector<float>& stat,
                 std::vector<float>& norm) {
    const int64_t P = g.P, I = g.I, J = g.J, L = g.L;
    V.resize(J * H * I);
    R.resize(P * J * I);
    stat.resize(P * J * (2 * H + 1) + I);  // mu, centre, logit_a per (p, j); the weights of one (p, j)
    norm.resize(2 * L);
    float* mu = stat.data();
    float* centre = mu + P * J * H;
    float* logit_a = centre + P * J * H;
    float* wt = logit_a + P * J;
    float* peak = norm.data();
    float* Z = peak + L;
    // |vote - centre| <= 2 (4 max|pose| max|W| + max|offset|): the image's scale, at least 1
    float pose_max = 0, off_max = 0;
    for (int64_t k = 0; k < P * H * I; ++k) pose_max = std::max(pose_max, std::fabs(g.poses[b * P * H * I + k]));
    if (g.offset)
        for (int64_t k = 0; k < H * I; ++k) off_max = std::max(off_max, std::fabs(g.offset[k]));
    const float scale = std::max(8 * pose_max * g.w_max + 2 * off_max, 1.0f);
    const float floor_ = std::max(g.var_floor / (scale * scale), 1e-20f), log_scale = std::log(scale);

    for (int t = 0; t < g.iterations; ++t) {
        const float lam = g.lambdas[t];
        const bool last = t == g.iterations - 1;
        std::fill(peak, peak + L, -std::numeric_limits<float>::infinity());
        for (int64_t p = 0; p < P; ++p) {
            make_votes(g, b, p, 1.0f / scale, V.data(), centre + p * J * H);
            const float* a = g.a_in + (b * P + p) * I;
            float* la = logit_a + p * J;
            float inv[16 * 64], logdet[64];  // this position's 1 / sig2 and sum of log sig2 per j (J <= 64)
            // M-step for each upper capsule j; the first one with uniform assignments 1/J.
            for (int64_t j = 0; j < J; ++j) {
                const float* r = R.data() + (p * J + j) * I;
                v16 sv{};
                for (int64_t i = 0; i < I; i += 16) {
                    const v16 w = t == 0 ? load(a + i) * (1.0f / J) : load(r + i) * load(a + i);
                    store(wt + i, w);
                    sv += w;
                }
                const float s = total(sv);
                const float scale_w = 1.0f / (s + EPS);
                double prod[2] = {1.0, 1.0};  // sig2 products of 8 entries each: 2 logs, not 16
                const float* v = V.data() + j * H * I;
                for (int h = 0; h < H; ++h) {
                    v16 m1{}, m2{};
                    for (int64_t i = 0; i < I; i += 16) {
                        const v16 w = load(wt + i), vi = load(v + h * I + i);
                        m1 += w * vi;
                        m2 += w * vi * vi;
                    }
                    const float mean = total(m1) * scale_w;
                    const float s2 = std::max(total(m2) * scale_w - mean * mean, 0.0f) + floor_;
                    mu[(p * J + j) * H + h] = mean;
                    inv[j * H + h] = 1.0f / s2;
                    prod[h >> 3] *= s2;  // >= 1e-160: s2 >= the floor, 1e-20
                }
                logdet[j] = float(std::log(prod[0]) + std::log(prod[1]));  // sum over h of log sig2
                // the cost: sum over h of beta_u + log sigma_h (true units), times S; standardised below
                la[j] = (H * (g.beta_u[j] + log_scale) + 0.5f * logdet[j]) * s;
            }
            // Standardise the costs across the J capsules competing at this position.
            double mean = 0, var = 0;
            for (int64_t j = 0; j < J; ++j) mean += la[j];
            mean /= J;
            for (int64_t j = 0; j < J; ++j) var += (la[j] - mean) * (la[j] - mean);
            const float sd = std::sqrt(var / J) + 1e-6f;
            for (int64_t j = 0; j < J; ++j) la[j] = lam * (g.beta_a[j] - (la[j] - float(mean)) / sd);
            if (last) continue;
            // E-step logits: log-probability of each vote under each upper capsule's Gaussian.
            const int64_t* low = g.lower + p * I;
            for (int64_t j = 0; j < J; ++j) {
                const float* m = mu + (p * J + j) * H;
                const float* v = V.data() + j * H * I;
                float* r = R.data() + (p * J + j) * I;
                const float base = log_sigmoid(la[j]) - 0.5f * logdet[j];
                for (int64_t i = 0; i < I; i += 16) {
                    v16 q{};
                    for (int h = 0; h < H; ++h) {
                        const v16 d = load(v + h * I + i) - m[h];
                        q += d * d * inv[j * H + h];
                    }
                    q = q < 1e30f ? q : splat(1e30f);
                    store(r + i, base - 0.5f * q);
                }
                for (int64_t i = 0; i < I; ++i) peak[low[i]] = std::max(peak[low[i]], r[i]);
            }
        }
        if (last) break;
        // Each lower capsule's softmax over every (p, j) it reaches.
        std::fill(Z, Z + L, 0.0f);
        for (int64_t p = 0; p < P; ++p) {
            const int64_t* low = g.lower + p * I;
            for (int64_t i = 0; i < I; ++i) wt[i] = peak[low[i]];
            for (int64_t j = 0; j < J; ++j) {
                float* r = R.data() + (p * J + j) * I;
                for (int64_t i = 0; i < I; i += 16) store(r + i, exp_nonpositive(load(r + i) - load(wt + i)));
                for (int64_t i = 0; i < I; ++i) Z[low[i]] += r[i];
            }
        }
        for (int64_t l = 0; l < L; ++l) Z[l] = 1.0f / Z[l];
        for (int64_t p = 0; p < P; ++p) {
            const int64_t* low = g.lower + p * I;
            for (int64_t i = 0; i < I; ++i) wt[i] = Z[low[i]];
            for (int64_t j = 0; j < J; ++j) {
                float* r = R.data() + (p * J + j) * I;
                for (int64_t i = 0; i < I; i += 16) store(r + i, load(r + i) * load(wt + i));
            }
        }
    }
    for (int64_t pj = 0; pj < P * J; ++pj) {
        g.a_out[b * P * J + pj] = 1.0f / (1.0f + std::exp(-logit_a[pj]));
        for (int h = 0; h < H; ++h) g.mu_out[(b * P * J + pj) * H + h] = (mu[pj * H + h] + centre[pj * H + h]) * scale;
    }
}

}  // namespace

extern "C" int capsviz_em_routing(const float* poses, const float* W, const float* offset, const float* a_in,
                                  const float* beta_u, const float* beta_a, const int64_t* lower, int64_t B, int64_t P,
                                  int64_t I, int64_t I_real, int64_t J, int64_t L, float var_floor, int iterations,
                                  const float* lambdas, int threads, float* a_out, float* mu_out) {
    if (B < 0 || P < 1 || I_real < 1 || I_real > I || I % 16 != 0 || J < 1 || J > 64 || L < 1 || iterations < 1) return 1;
    for (int64_t k = 0; k < P * I; ++k)
        if (lower[k] < 0 || lower[k] >= L) return 2;
    float w_max = 0;
    for (int64_t k = 0; k < J * H * I; ++k) w_max = std::max(w_max, std::fabs(W[k]));
    const Layer g{poses, W, offset, a_in, beta_u, beta_a, lower, P, I, I_real, J, L, var_floor, w_max, iterations, lambdas, a_out, mu_out};
#pragma omp parallel num_threads(threads)
    {
        std::vector<float> V, R, stat, norm;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < B; ++b) route_image(g, b, V, R, stat, norm);
    }
    return 0;
}
