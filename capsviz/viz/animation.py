"""Animated GIFs of routing iterations for slides: PIL frames in, GIF bytes out."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from capsviz.analysis.playground import DynamicToy, EMToy
from capsviz.families.capsnet.tour import CapsNetTour
from capsviz.families.matrix_capsnet.tour import MatrixTour
from capsviz.i18n import t
from capsviz.viz import overlay
from capsviz.viz.teach import (
    INK,
    RoutingPieces,
    _canvas,
    draw_lines,
    dynamic_pieces,
    em_frame,
    em_pieces,
    font,
    line_height,
    whole,
    wrap,
)


def gif_bytes(frames: list[Image.Image], ms_per_frame: int = 1200, last_ms: int = 2500) -> bytes:
    """Frames (any sizes; pasted on a white canvas of the largest) -> a looping GIF. The last frame
    stays up longer: it is the result the iterations lead to."""
    if not frames:
        raise ValueError("a GIF needs at least one frame")
    W, H = max(f.width for f in frames), max(f.height for f in frames)
    canvas = []
    for f in frames:
        c = Image.new("RGB", (W, H), "white")
        c.paste(f.convert("RGB"), (0, 0))
        # one adaptive palette per frame: the figures use few colours, and a shared web palette bands the alpha shades
        canvas.append(c.quantize(colors=255, method=Image.Quantize.MEDIANCUT))
    durations = [ms_per_frame] * (len(frames) - 1) + [last_ms]
    buf = io.BytesIO()
    canvas[0].save(buf, format="GIF", save_all=True, append_images=canvas[1:], duration=durations, loop=0, disposal=1)
    return buf.getvalue()


def dynamic_toy_pieces(toy: DynamicToy, names: list[str] | None, it: int) -> RoutingPieces:
    """The dynamic (or self-attention) toy's iteration `it` in pieces, as a page lays them out."""
    title = t("Routing by agreement: iteration {k} of {T}", k=it + 1, T=toy.iterations)
    return dynamic_pieces(toy.u_hat, toy.c[it], toy.s[it], toy.v[it], title, names)


def em_toy_pieces(toy: EMToy, names: list[str] | None, it: int) -> RoutingPieces:
    """The EM toy's iteration `it` in pieces, as a page lays them out."""
    title = t("EM routing: iteration {k} of {T} (lambda = {lam})", k=it + 1, T=toy.iterations, lam=f"{toy.lambdas[it]:.2f}")
    return em_pieces(toy.votes, toy.R[it], toy.mu[it], toy.sigma[it], toy.a[it], title, names)


def dynamic_frames(toy: DynamicToy, names: list[str] | None = None, only: int | None = None) -> list[Image.Image]:
    """The toy's iterations as frames (`only`: that iteration's frame alone)."""
    return [whole(dynamic_toy_pieces(toy, names, it)) for it in (range(toy.iterations) if only is None else [only])]


def em_frames(toy: EMToy, names: list[str] | None = None, only: int | None = None) -> list[Image.Image]:
    """The toy's EM iterations as frames (`only`: that iteration's frame alone)."""
    return [whole(em_toy_pieces(toy, names, it)) for it in (range(toy.iterations) if only is None else [only])]


def _limit(*arrays: np.ndarray) -> float:
    """A plot range that holds every prediction and output drawn (s may run off: it says so)."""
    return 1.15 * max(float(np.abs(a).max()) for a in arrays)


def tour_routing_pieces(tour: CapsNetTour, names, it: int, capsule: str | None = None) -> RoutingPieces:
    """The tour's routing iteration `it` in pieces: the winner's and the runner-up's panels, with
    the shown primary capsules' predictions in each class capsule's plane (its first axis is the
    final v_j, so the agreement u_hat . v reads off the x axis). `capsule`: what the model's class
    capsules are called (capsviz.glossary.class_words)."""
    pair = [tour.winner, tour.runner_up]
    preds = tour.pred2d[pair].transpose(1, 0, 2)  # (SHOWN, 2, 2)
    capsule = t("digit capsule") if capsule is None else capsule
    return dynamic_pieces(
        preds,
        tour.c[it][tour.shown][:, pair],  # (SHOWN, 2)
        tour.s2d[it, pair],
        tour.v2d[it, pair],
        t("Routing iteration {k} of {T}: the six loudest predictions for {name}", k=it + 1, T=tour.iterations, name=names[tour.winner]),
        [f"{k + 1}: {n}" for k, n in enumerate(tour.shown_names)],
        _limit(preds, tour.v2d[:, pair]),
        [t("{capsule} {name}", capsule=capsule, name=names[j]) for j in pair],
        t(
            "coupling c to {first} (blue) and {second} (orange); the other {capsule}s take the rest",
            first=names[pair[0]],
            second=names[pair[1]],
            capsule=capsule,
        ),
        np.stack([tour.s_len[it, pair], tour.v_len[it, pair]], -1),  # the full 16-number lengths, as the text quotes them
    )


def tour_routing_frames(tour: CapsNetTour, names, only: int | None = None, capsule: str | None = None) -> list[Image.Image]:
    """The tour's routing iterations as whole pictures (`tour_routing_pieces`), for slides: `only`,
    just that iteration's frame; the GIF takes them all."""
    return [whole(tour_routing_pieces(tour, names, it, capsule)) for it in (range(tour.iterations) if only is None else [only])]


def tour_em_frames(tour: MatrixTour, names, only: int | None = None) -> list[Image.Image]:
    """The matrix tour's EM iterations for the winning and runner-up class capsules: the most
    active lower capsules' votes and each class's Gaussian, in a plane through its final mean.
    `only`: just that iteration's frame."""
    pair = [tour.winner, tour.runner_up]
    votes = tour.votes2d[pair].transpose(1, 0, 2)  # (SHOWN, 2, 2)
    limit = _limit(votes, tour.mu2d[:, pair] + 2 * tour.sigma2d[:, pair])
    uppers = [t("class capsule {name}", name=names[j]) for j in pair]
    frames = []
    for it in range(tour.iterations) if only is None else [only]:
        frames.append(
            em_frame(
                votes,
                tour.R[it][tour.shown][:, pair],
                tour.mu2d[it, pair],
                tour.sigma2d[it, pair],
                tour.a[it, pair],
                t(
                    "EM iteration {k} of {T} (lambda = {lam}): the six most active lower capsules",
                    k=it + 1,
                    T=tour.iterations,
                    lam=f"{tour.lambdas[it]:.2f}",
                ),
                [f"{k + 1}: {n}" for k, n in enumerate(tour.shown_names)],
                limit,
                uppers,
                t(
                    "assignment R to {first} (blue) and {second} (orange); the other class capsules take the rest",
                    first=names[pair[0]],
                    second=names[pair[1]],
                ),
            )
        )
    return frames


def tour_vote_frame(tour: MatrixTour, names) -> Image.Image:
    """The votes alone, before EM fits anything: the same planes as `tour_em_frames`."""
    pair = [tour.winner, tour.runner_up]
    votes = tour.votes2d[pair].transpose(1, 0, 2)  # (SHOWN, 2, 2)
    return em_frame(
        votes,
        tour.R[0][tour.shown][:, pair],
        tour.mu2d[0, pair],
        tour.sigma2d[0, pair],
        tour.a[0, pair],
        t("Votes of the six most active lower capsules, before routing"),
        [f"{k + 1}: {n}" for k, n in enumerate(tour.shown_names)],
        _limit(votes, tour.mu2d[:, pair] + 2 * tour.sigma2d[:, pair]),
        [t("votes for class capsule {name}", name=names[j]) for j in pair],
        t(
            "assignment R to {first} (blue) and {second} (orange): equal for every class before routing",
            first=names[pair[0]],
            second=names[pair[1]],
        ),
        fit=False,
    )


def coupling_frames(
    c_maps: np.ndarray, image: np.ndarray, names: list[str], only: int | None = None, capsule: str | None = None
) -> list[Image.Image]:
    """Dynamic routing on a trained model, for slides: (T, J, G, G) coupling maps, one frame per
    iteration with each class capsule's map over the input (`capsule`: what the model calls them).
    One colour scale for every frame, so what changes from frame to frame is the couplings, not the scale."""
    T, J = c_maps.shape[:2]
    capsule = t("digit capsule") if capsule is None else capsule
    lo, hi = float(c_maps.min()), float(c_maps.max())
    frames = []
    for it in range(T) if only is None else [only]:
        tiles = [overlay(image, c_maps[it, j], scale=3, lo=lo, hi=hi) for j in range(J)]
        w, h = tiles[0].size
        width = J * (w + 6) + 10
        titled = wrap(
            t("Iteration {k} of {T}: coupling c to each {capsule} over the input", k=it + 1, T=T, capsule=capsule), font(16), width - 20
        )
        scaled = wrap(
            t("red: a larger share of the vote; one scale for every iteration, c from {lo} to {hi}", lo=f"{lo:.3f}", hi=f"{hi:.3f}"),
            font(12),
            width - 20,
        )
        named = [wrap(str(n), font(12), w) for n in names]  # each under its tile, centred
        top = 8 + len(titled) * line_height(font(16)) + len(scaled) * line_height(font(12)) + 6
        img, draw = _canvas(width, top + h + 6 + max(map(len, named)) * line_height(font(12)))
        y = 8 + draw_lines(draw, (10, 8), titled, font(16), INK)
        draw_lines(draw, (10, y), scaled, font(12), INK)
        for j, tile in enumerate(tiles):
            x = 10 + j * (w + 6)
            img.paste(tile, (x, top))
            for k, line in enumerate(named[j]):
                middle = x + (w - font(12).getlength(line)) / 2
                draw.text((middle, top + 2 + h + k * line_height(font(12))), line, fill=INK, font=font(12))
        frames.append(img)
    return frames
