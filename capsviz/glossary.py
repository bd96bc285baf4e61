"""One glossary for every page: each symbol or term the app shows, in plain words.

Pages pass `help_text(...)` as a widget's `help=` (a hover explanation) and `label(...)` beside a
symbol, so a student meets "c (coupling)" rather than a bare letter. `class_words(meta)` names a
model's class capsules as its dataset needs: digit capsules for MNIST, class capsules otherwise.
Wording follows TEACHING.md's words: presence, pose, prediction / vote, coupling, routing logit,
agreement, assignment, spread, inverse temperature.
"""

from __future__ import annotations

from dataclasses import dataclass

from capsviz.config import DATASETS


@dataclass(frozen=True)
class Term:
    symbol: str  # as the pages print it
    word: str  # the plain word written beside the symbol
    explanation: str  # one or two plain sentences, with the paper's equation where there is one

    @property
    def named(self) -> str:
        """'c_ij (coupling)': the symbol with its plain word beside it."""
        return self.symbol if self.symbol == self.word else f"{self.symbol} ({self.word})"


TERMS: dict[str, Term] = {
    "capsule": Term(
        "capsule",
        "capsule",
        "A small group of neurons whose output is a vector (or a 4x4 pose matrix) instead of one number: "
        "its length (or activation) says how likely a thing is present, its direction (or pose) says how it looks.",
    ),
    "u": Term(
        "u_i",
        "lower capsule output",
        "The output vector of lower (primary) capsule i: its length is how sure it is that its part is present, its direction is the part's pose.",
    ),
    "W": Term(
        "W_ij",
        "part-whole transform",
        "A learned matrix that turns lower capsule i's pose into a prediction of upper capsule j's pose: "
        "'if this is the nose, the face is centred here and this big'.",
    ),
    "u_hat": Term(
        "u_hat_j|i",
        "prediction",
        "Lower capsule i's prediction (vote) for the output of upper capsule j: u_hat_j|i = W_ij u_i (Eq. 2 of Sabour et al.).",
    ),
    "b": Term(
        "b_ij",
        "routing logit",
        "How much lower capsule i has agreed with upper capsule j so far. Starts at 0; each iteration adds the agreement u_hat_j|i . v_j.",
    ),
    "c": Term(
        "c_ij",
        "coupling",
        "The share of lower capsule i's prediction sent to upper capsule j: a softmax of b_i over the upper capsules, "
        "so each lower capsule's couplings add up to 1 (Eq. 3). At the first iteration they are all equal.",
    ),
    "s": Term(
        "s_j",
        "weighted sum",
        "Upper capsule j's total input: the predictions for j weighted by their couplings, s_j = sum_i c_ij u_hat_j|i (Eq. 2).",
    ),
    "v": Term(
        "v_j",
        "upper capsule output",
        "s_j after squashing: same direction, length between 0 and 1. Its length is how present upper capsule j's entity is.",
    ),
    "squash": Term(
        "squash",
        "squash",
        "v = |s|^2 / (1 + |s|^2) * s / |s| (Eq. 1): short vectors shrink towards length 0, long ones approach length 1, the direction is kept.",
    ),
    "agreement": Term(
        "u_hat . v",
        "agreement",
        "The dot product of a prediction with the upper capsule's output: positive when they point the same way "
        "(the coupling rises next iteration), negative when opposite (it falls).",
    ),
    "length": Term(
        "|v_j|",
        "presence",
        "The length of a capsule's vector, between 0 and 1: how likely its entity (a digit, a part) is present.",
    ),
    "iteration": Term(
        "iteration",
        "routing iteration",
        "One round of routing: couplings -> weighted sum -> squash -> agreement added to the logits. The paper uses 3.",
    ),
    "margin_loss": Term(
        "margin loss",
        "margin loss",
        "Training pushes the correct class capsule's length above 0.9 and every other one below 0.1 (Eq. 4 of Sabour et al.).",
    ),
    "dimension": Term(
        "d0..d15",
        "dimension",
        "One of the 16 numbers of a class capsule's vector. Together they describe how the digit or object is drawn (its pose): "
        "nudging one and redrawing shows what it encodes, such as stroke thickness, slant or width (Fig. 4 of Sabour et al.).",
    ),
    "reconstruction": Term(
        "reconstruction",
        "reconstruction",
        "A small decoder redraws the input (the digit, for MNIST) from the winning capsule's 16 numbers alone; it keeps the capsule's direction meaningful (Sec. 4.1).",
    ),
    "primary": Term(
        "PrimaryCaps",
        "primary capsules",
        "The first capsule layer: a convolution whose outputs are grouped into 8-D vectors, 32 types at each of 6x6 positions in the paper.",
    ),
    "conv1": Term(
        "Conv1",
        "first convolution",
        "256 filters of 9x9 pixels with ReLU: local features such as edges and stroke ends, read by the primary capsules.",
    ),
    "pose": Term(
        "pose",
        "pose",
        "How an entity is instantiated: position, size, orientation, stroke thickness. A vector's direction, or a 4x4 pose matrix.",
    ),
    "vote": Term(
        "V_ij",
        "vote",
        "In matrix capsules, lower capsule i's vote for upper capsule j's pose: its pose matrix times a learned 4x4 transform (Hinton et al. Sec. 2).",
    ),
    "a_in": Term(
        "a_i",
        "lower activation",
        "How present lower capsule i is (0 to 1); in EM it weights how much its vote counts when the upper capsules are refitted.",
    ),
    "a_j": Term(
        "a_j",
        "activation",
        "How present upper capsule j is (0 to 1): a logistic of beta_a minus the cost of its spread, sharper as lambda rises. Tight clusters of votes win.",
    ),
    "R": Term(
        "R_ij",
        "assignment",
        "The share of lower capsule i's vote that upper capsule j explains (the E-step): high when the vote fits j's Gaussian well "
        "and j is active. Each lower capsule's assignments add up to 1; at the start they are all equal.",
    ),
    "mu": Term(
        "mu_j",
        "mean pose",
        "The centre of upper capsule j's Gaussian: the assignment-weighted mean of the votes it explains (M-step). It becomes j's pose.",
    ),
    "sigma": Term(
        "sigma_j",
        "spread",
        "How far the votes j explains scatter around its mean, per pose entry (M-step). Small spread = the parts agree.",
    ),
    "lambda": Term(
        "lambda",
        "inverse temperature",
        "Sharpens the activations over the iterations: small lambda keeps every capsule partly active, larger lambda makes the decision firm. "
        "The paper raises it on a fixed schedule; capsviz ramps it linearly to its final value.",
    ),
    "beta_u": Term(
        "beta_u",
        "cost per unit of spread",
        "A learned cost added per pose entry and per unit of assignment: it sets how expensive it is for a capsule to explain votes at all.",
    ),
    "beta_a": Term(
        "beta_a",
        "activation bias",
        "A learned offset in the activation's logistic: how willing an upper capsule is to switch on whatever its cost.",
    ),
    "E_step": Term(
        "E-step",
        "assign",
        "Each vote is reassigned to the upper capsules by how probable it is under each one's Gaussian, weighted by that capsule's activation.",
    ),
    "M_step": Term(
        "M-step",
        "refit",
        "Each upper capsule refits its Gaussian (mean pose, spread) and its activation to the votes assigned to it.",
    ),
    "spread_loss": Term(
        "spread loss",
        "spread loss",
        "Training pushes the correct class's activation above every other class's by a margin that grows during training (Hinton et al. Sec. 3.1).",
    ),
    "uniform": Term(
        "c_ij = 1/J",
        "uniform couplings",
        "No routing: every lower capsule splits its prediction equally over the J upper capsules. "
        "Dynamic routing with one iteration is exactly this, since b starts at 0.",
    ),
    "random_couplings": Term(
        "c_i = softmax(r_i)",
        "fixed random couplings",
        "A baseline: each lower capsule splits its prediction by a softmax of random numbers r_i drawn once from a fixed seed "
        "and never changed, so the split is uneven but owes nothing to agreement.",
    ),
    "self_attention": Term(
        "a_ji",
        "self-attention agreement",
        "Efficient-CapsNet's routing, in one pass: how well prediction u_hat_j|i agrees with all the predictions for class j, "
        "a_ji = sum_k u_hat_j|i . u_hat_j|k / sqrt(D), D being a prediction's number of dimensions (16): the division keeps "
        "the sums of many products from growing with D. The couplings c_ij are the softmax of a_ji over the classes; "
        "the weighted sum then adds the learned prior b_ji to each.",
    ),
    "prior": Term(
        "b_ji",
        "learned prior",
        "Efficient-CapsNet's log prior: one number per lower capsule i and class j, learned in training and the same for "
        "every image. It is added to the coupling, s_j = sum_i (c_ij + b_ji) u_hat_j|i, so it says how much capsule i feeds "
        "class j whatever the image shows; where c_ij + b_ji is below 0, prediction i pulls s_j the opposite way. "
        "(Not dynamic routing's b_ij, which starts at 0 for every image.)",
    ),
    "efficient_squash": Term(
        "v = (1 - 1/e^|s|) s / |s|",
        "Efficient-CapsNet's squash",
        "Like Eq. 1's squash it keeps the direction and gives a length between 0 and 1, but the length is 1 - e^-|s|: "
        "|s| = 1 gives 0.63 where Eq. 1 gives 0.50, so short vectors keep more of their length.",
    ),
    "entropy": Term(
        "entropy",
        "how undecided",
        "Of a lower capsule's couplings: log J when it splits its vote equally over J capsules, 0 when it sends everything to one.",
    ),
    "epsilon": Term(
        "epsilon",
        "attack size",
        "How far an attack may change each pixel (pixels run from 0 to 1): 0.1 lets every pixel move by up to a tenth of "
        "the way from black to white. Larger epsilon, stronger attack, and a more visibly changed image.",
    ),
    "fgsm": Term(
        "FGSM",
        "one-step attack",
        "Fast gradient sign method: every pixel moves by epsilon in the direction that most increases the model's error, "
        "worked out from one gradient of the loss with respect to the image.",
    ),
    "bim": Term(
        "BIM",
        "many-step attack",
        "Basic iterative method: FGSM in 10 smaller steps, each recomputing the gradient and kept within epsilon of the "
        "original image. Usually stronger than FGSM at the same epsilon.",
    ),
    "targeted": Term(
        "targeted",
        "attack towards a chosen class",
        "Untargeted attacks push the image away from its true class (accuracy should fall); targeted ones pull it towards "
        "one chosen wrong class (the success rate is how often the model then says that class).",
    ),
    "affine": Term(
        "affine transform",
        "rotate, scale, shear, move",
        "A change of the image that keeps straight lines straight: rotation, scaling, shearing and shifting. The capsule "
        "papers claim capsules cope better with poses they did not see in training.",
    ),
    "test_error": Term(
        "test error",
        "share of test images got wrong",
        "Of the images the model never saw in training, the percentage it classifies wrongly: 0.5% is 50 of 10,000.",
    ),
}


# The plain words lead to the same entries as the symbols: a page may ask for "coupling" or "c".
ALIASES = {
    "coupling": "c",
    "routing_logit": "b",
    "prediction": "u_hat",
    "weighted_sum": "s",
    "output": "v",
    "presence": "length",
    "activation": "a_j",
    "assignment": "R",
    "mean_pose": "mu",
    "spread": "sigma",
    "inverse_temperature": "lambda",
    "learned_prior": "prior",
    "log_prior": "prior",
}


def term(key: str) -> Term:
    """The glossary entry for a symbol or a plain word ("c", "coupling", "margin loss"); a KeyError
    names the known keys (a typo in a page is caught by its tests)."""
    k = key.strip().replace(" ", "_").replace("-", "_")
    k = ALIASES.get(k.lower(), k)
    for candidate in (k, k.lower()):
        if candidate in TERMS:
            return TERMS[candidate]
    raise KeyError(f"no glossary entry {key!r}; known: {', '.join([*TERMS, *ALIASES])}")


def label(key: str) -> str:
    """'c_ij (coupling)': a symbol with its plain word beside it."""
    return term(key).named


def help_text(*keys: str) -> str:
    """Markdown for a widget's `help=`: each term in bold with its explanation, one per paragraph."""
    return "\n\n".join(f"**{label(k)}**: {term(k).explanation}" for k in keys)


def entries(query: str = "") -> list[Term]:
    """Every entry in teaching order, or those whose symbol, word or explanation holds `query`
    (case ignored): the glossary page lists them, with the same text as the hover help."""
    q = query.strip().lower()
    return [t for t in TERMS.values() if not q or q in f"{t.symbol} {t.word} {t.explanation}".lower()]


@dataclass(frozen=True)
class ClassWords:
    """What the pages call a model's class capsules and what they stand for."""

    digits: bool  # trained on handwritten digits (MNIST and the sets made from it)
    capsule: str  # "digit capsule" / "class capsule"
    thing: str  # what one class capsule stands for: "digit" / "class"
    things: str
    shown: str  # what one input shows, and the decoder redraws: "digit" / "object"
    pictures: str  # the test set's items: "digits" / "images"

    @property
    def capsules(self) -> str:
        return self.capsule + "s"


DIGIT_WORDS = ClassWords(True, "digit capsule", "digit", "digits", "digit", "digits")
CLASS_WORDS = ClassWords(False, "class capsule", "class", "classes", "object", "images")


def class_words(model) -> ClassWords:
    """The words for a model's class capsules: `model` is its checkpoint metadata (its
    `image_dataset` decides) or a dataset's name. Digits only for the digit datasets (MNIST,
    MultiMNIST, affNIST); Fashion-MNIST and a user's own images have classes."""
    dataset = model if isinstance(model, str) else model.image_dataset
    found = DATASETS.get(dataset)
    return DIGIT_WORDS if found is not None and found.source == "mnist" else CLASS_WORDS
