"""One glossary for every page: each symbol or term the app shows, in plain words.

Pages pass `help_text(...)` as a widget's `help=` (a hover explanation) and `label(...)` beside a
symbol, so a student meets "c (coupling)" rather than a bare letter. `class_words(meta)` names a
model's class capsules as its dataset needs: digit capsules for MNIST, class capsules otherwise.
Wording follows TEACHING.md's words: presence, pose, prediction / vote, coupling, routing logit,
agreement, assignment, spread, inverse temperature. Every term, symbol and abbreviation a page shows
has an entry (tests/test_glossary.py collects them from the pages), findable by the papers' own
names and the usual synonyms (`Term.also`, `lookup`, `entries`). The rules that turn numbers into
words (capsviz.analysis.rules.RULES) are entries too, in the very words the rules are defined by.

Every word is a message of the catalog (capsviz.i18n): the table keeps the English, marked `N_`, and
`label`, `help_text`, `class_words` and a Term's `word_in()`, `explain()`, `named_in()` and
`heading()` give it in the reader's language, in the words ../shared/TERMS.md lists. The search
finds an entry by its Chinese or Japanese name too (TRANSLATED, `translated`): 胶囊, 耦合系数,
カプセル, 結合係数. A new Term's symbol (when it is a word), word and explanation take `N_(...)`;
`python -m capsviz translations` then adds them to the catalogs to translate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from urllib.parse import quote

from capsviz.analysis.rules import RULES, rule_words
from capsviz.config import DATASETS
from capsviz.i18n import FOLDERS, N_, SOURCE, language, speaking, t
from capsviz.text import plain


@dataclass(frozen=True)
class Term:
    """One entry. `symbol`, `word` and `explanation` are English, the catalog's messages (marked `N_`
    where they are words; a symbol such as c_ij stays as the papers print it): the `..._in()`
    methods and `explain()` give them in the reader's language."""

    symbol: str  # as the pages print it
    word: str  # the plain word written beside the symbol
    explanation: str  # one or two plain sentences, with the paper's equation where there is one
    also: tuple[str, ...] = ()  # other names it goes by: the papers' terms, synonyms, abbreviations, plain symbols
    rule: str = ""  # a rule of capsviz.analysis.rules.RULES: the explanation is that rule's message
    paper: str = ""  # the English papers' own name for it, where the plain word differs

    @property
    def named(self) -> str:
        """'c_ij (coupling)': the symbol with its plain word beside it (English)."""
        return self.symbol if self.symbol == self.word else f"{self.symbol} ({self.word})"

    def symbol_in(self) -> str:
        """The symbol in the reader's language: a word-like one ("capsule", "E-step") translated, a
        symbol of the papers (c_ij, PrimaryCaps) as it is."""
        return t(self.symbol) if self.symbol else self.symbol

    def word_in(self) -> str:
        """The plain word in the reader's language."""
        return t(self.word) if self.word else self.word

    def explain(self) -> str:
        """The explanation in the reader's language."""
        return rule_words(self.rule) if self.rule else t(self.explanation)

    def named_in(self) -> str:
        """`named` in the reader's language: 'c_ij（耦合系数）', '胶囊'."""
        symbol, word = self.symbol_in(), self.word_in()
        if self.symbol == self.word or symbol == word:
            return symbol
        return t("{symbol} ({word})", symbol=symbol, word=word)

    @property
    def english(self) -> str:
        """The name a student looks for in the English papers."""
        return self.paper or self.word

    def heading(self) -> str:
        """The entry's name as the glossary page shows it, in markdown: English, '**c_ij (coupling)**';
        another language, each word followed by its English in brackets, '**c_ij** 耦合系数（coupling
        coefficient）', '**胶囊**（capsule）'."""
        if language() == SOURCE:
            return f"**{self.named}**"
        symbol, word = self.symbol_in(), self.word_in()
        if symbol == self.symbol:  # a symbol of the papers, kept as it is
            if self.symbol == self.word or word == self.symbol:
                return f"**{symbol}**"
            return f"**{symbol}** " + t("{term} ({english})", term=word, english=self.english)
        said = t("{term} ({english})", term=f"**{symbol}**", english=self.symbol)
        if self.word != self.symbol and word != symbol:
            said += " · " + t("{term} ({english})", term=word, english=self.english)
        return said


TERMS: dict[str, Term] = {
    "capsule": Term(
        N_("capsule"),
        N_("capsule"),
        N_(
            "A small group of neurons whose output is a vector (or a 4x4 pose matrix) instead of one number: "
            "its length (or activation) says how likely a thing is present, its direction (or pose) says how it looks."
        ),
        ("capsules", "capsule network", "CapsNet", "CapsNets", "vector capsule"),
    ),
    "capsnet": Term(
        "CapsNet",
        N_("capsule network of Sabour et al."),
        N_(
            "The capsule network of Sabour et al. (2017): Conv1, then PrimaryCaps, then one capsule per class (DigitCaps), "
            "joined by dynamic routing, with a decoder that redraws the input from the winning capsule. The paper's has "
            "6.8 million parameters without the decoder; capsviz's small presets are narrower."
        ),
        ("Sabour et al.", "capsnet-small"),
    ),
    "efficient": Term(
        "Efficient-CapsNet",
        "Efficient-CapsNet",
        N_(
            "The capsule network of Mazzia, Salvetti and Chiaberge (2021): a few convolutions with BatchNorm, primary capsules "
            "made by a depthwise convolution, and one pass of self-attention routing to the class capsules instead of "
            "iterations; about 161 thousand parameters without the decoder."
        ),
        ("Mazzia et al.", "Efficient CapsNet"),
    ),
    "matrix": Term(
        N_("matrix capsules"),
        N_("matrix capsules"),
        N_(
            "The capsules of Hinton et al. (2018): each has a 4x4 pose matrix and a separate activation (a number between 0 "
            "and 1), and layers are joined by EM routing. A, B, C and D count the capsule types of its layers (ReLU "
            "convolution, primary capsules, ConvCaps1, ConvCaps2) before the class capsules."
        ),
        ("matrix capsule", "matrix capsule model", "Hinton et al.", "A, B, C, D", "matrix-small"),
    ),
    "routing": Term(
        N_("routing"),
        N_("routing"),
        N_(
            "How the outputs of lower capsules are shared out among the upper capsules: each lower capsule's prediction is "
            "sent to every upper capsule, weighted by a coupling (dynamic routing) or an assignment (EM routing) that "
            "the routing works out for this image."
        ),
        ("routing algorithm", "couplings while training"),
    ),
    "dynamic_routing": Term(
        N_("dynamic routing"),
        N_("routing by agreement"),
        N_(
            "Sabour et al.'s routing (Procedure 1): the logits b start at 0; each iteration turns them into couplings "
            "c = softmax(b), forms s_j and v_j = squash(s_j), and adds the agreement u_hat_j|i . v_j to b_ij. Predictions "
            "that agree with an upper capsule's output send it more of their vote at the next iteration. The paper uses 3 iterations."
        ),
        ("routing by agreement", "routing-by-agreement", "dynamic", "Procedure 1"),
    ),
    "em_routing": Term(
        N_("EM routing"),
        N_("expectation-maximisation routing"),
        N_(
            "Hinton et al.'s routing for matrix capsules: each upper capsule is a Gaussian cluster of the votes, and "
            "routing alternates an E-step (reassign each vote R_ij to the clusters that explain it) and an M-step (refit "
            "each cluster's mean pose mu, spread sigma and activation a), sharpened by the inverse temperature lambda."
        ),
        ("EM", "expectation maximisation", "expectation maximization", "expectation-maximization"),
    ),
    "u": Term(
        "u_i",
        N_("lower capsule output"),
        N_(
            "The output vector of lower (primary) capsule i: its length is how sure it is that its part is present, its direction is the part's pose."
        ),
    ),
    "W": Term(
        "W_ij",
        N_("part-whole transform"),
        N_(
            "A learned matrix that turns lower capsule i's pose into a prediction of upper capsule j's pose: "
            "'if this is the nose, the face is centred here and this big'."
        ),
    ),
    "u_hat": Term(
        "u_hat_j|i",
        N_("prediction"),
        N_("Lower capsule i's prediction (vote) for the output of upper capsule j: u_hat_j|i = W_ij u_i (Eq. 2 of Sabour et al.)."),
        ("u_hat_j|i", "prediction vector", "predictions", "vote vector"),
        paper="prediction vector",
    ),
    "b": Term(
        "b_ij",
        N_("routing logit"),
        N_(
            "In dynamic routing, how much lower capsule i has agreed with upper capsule j so far (the log prior of the "
            "coupling). Starts at 0; each iteration adds the agreement u_hat_j|i . v_j."
        ),
        ("routing logit", "routing logits", "logit", "logits", "b_i"),
    ),
    "c": Term(
        "c_ij",
        N_("coupling"),
        N_(
            "The share of lower capsule i's prediction sent to upper capsule j; each lower capsule's couplings add up to 1. "
            "In dynamic routing they are a softmax of the logits b_i over the upper capsules (Eq. 3), all equal at the first "
            "iteration since b starts at 0. Efficient-CapsNet has no iterations: its couplings are the softmax of the "
            "self-attention agreement a_ji, computed once."
        ),
        ("coupling coefficient", "coupling coefficients", "couplings", "c_i", "c_ij = softmax(b_ij)"),
        paper="coupling coefficient",
    ),
    "s": Term(
        "s_j",
        N_("weighted sum"),
        N_("Upper capsule j's total input: the predictions for j weighted by their couplings, s_j = sum_i c_ij u_hat_j|i (Eq. 2)."),
        ("total input", "|s|", "|s_j|"),
    ),
    "v": Term(
        "v_j",
        N_("upper capsule output"),
        N_("s_j after squashing: same direction, length between 0 and 1. Its length is how present upper capsule j's entity is."),
        ("output vector", "capsule output"),
        paper="activity vector",
    ),
    "squash": Term(
        N_("squash"),
        N_("squash"),
        N_(
            "v = |s|^2 / (1 + |s|^2) * s / |s| (Eq. 1): short vectors shrink towards length 0, long ones approach length 1, the direction is kept."
        ),
        ("squashing", "squash function", "non-linearity"),
    ),
    "agreement": Term(
        "u_hat . v",
        N_("agreement"),
        N_(
            "The dot product of a prediction with the upper capsule's output: positive when they point the same way "
            "(the coupling rises next iteration), negative when opposite (it falls)."
        ),
        ("u_hat.v", "dot product", "agree"),
    ),
    "length": Term(
        "|v_j|",
        N_("presence"),
        N_(
            "The length of class capsule j's vector, between 0 and 1: the papers mean it to say how likely its entity (a digit, "
            "a class) is present, and the margin loss trains it towards that (above 0.9 when present, below 0.1 when not)."
        ),
        ("length", "|v|", "capsule length", "lengths"),
        paper="length",
    ),
    "primary_length": Term(
        "|u_i|",
        N_("primary capsule length"),
        N_(
            "The length of primary capsule i's vector u_i, between 0 and 1 after the squash. The paper means it to say how likely "
            "its part is present; nothing in training pushes it to 0 or 1, so a trained model may leave most of them long "
            "(the tour measures how many). Its predictions u_hat_j|i = W_ij u_i are vectors of other lengths."
        ),
        ("primary length", "u_i", "|u|", "primary capsule length"),
    ),
    "iteration": Term(
        N_("iteration"),
        N_("routing iteration"),
        N_(
            "One round of routing: couplings -> weighted sum -> squash -> agreement added to the logits (dynamic routing), "
            "or an M-step and an E-step (EM routing). The papers use 3."
        ),
        ("iterations", "routing iterations", "T"),
    ),
    "margin_loss": Term(
        N_("margin loss"),
        N_("margin loss"),
        N_("Training pushes the correct class capsule's length above 0.9 and every other one below 0.1 (Eq. 4 of Sabour et al.)."),
        ("margin",),
    ),
    "dimension": Term(
        "d0..d15",
        N_("dimension"),
        N_(
            "One of the 16 numbers of a class capsule's vector. Together they describe how the digit or object is drawn (its pose): "
            "nudging one and redrawing shows what it encodes, such as stroke thickness, slant or width (Fig. 4 of Sabour et al.)."
        ),
        ("dimensions", "d0", "d15", "offset", "perturbation", "perturbation grid"),
    ),
    "reconstruction": Term(
        N_("reconstruction"),
        N_("reconstruction"),
        N_(
            "A small decoder redraws the input (the digit, for MNIST) from the winning capsule's 16 numbers alone; it keeps the capsule's direction meaningful (Sec. 4.1). "
            "Its error, added to the training loss with a small weight, is the reconstruction loss."
        ),
        ("decoder", "reconstruction loss", "redraw"),
    ),
    "primary": Term(
        "PrimaryCaps",
        N_("primary capsules"),
        N_(
            "The first capsule layer: a convolution whose outputs are grouped into 8-D vectors, 32 types at each of 6x6 positions in the paper."
        ),
        ("primary capsules", "primary capsule", "lower capsules"),
    ),
    "digitcaps": Term(
        "DigitCaps",
        N_("class capsules"),
        N_(
            "The last capsule layer: one 16-D capsule per class (per digit, for MNIST), routed from the primary capsules. The "
            "longest one is the model's answer; the decoder redraws the input from it."
        ),
        ("digit capsules", "digit capsule", "class capsules", "class capsule", "upper capsules", "ClassCaps"),
    ),
    "conv1": Term(
        "Conv1",
        N_("first convolution"),
        N_("256 filters of 9x9 pixels with ReLU: local features such as edges and stroke ends, read by the primary capsules."),
        ("convolution", "feature maps", "filters"),
    ),
    "relu": Term(
        "ReLU",
        N_("rectified linear unit"),
        N_("max(0, x): keeps positive values and turns negative ones into 0. The usual activation after a convolution."),
        ("rectified linear unit",),
    ),
    "batchnorm": Term(
        "BatchNorm",
        N_("batch normalisation"),
        N_(
            "Rescales each channel of a layer's output to mean 0 and spread 1 over the images of a batch (then by learned "
            "amounts), which steadies training. Efficient-CapsNet uses it after each convolution."
        ),
        ("batch normalisation", "batch normalization", "BN"),
    ),
    "cnn": Term(
        "CNN",
        N_("convolutional neural network"),
        N_(
            "A network of convolutions followed by fully connected layers, ending in one score per class, without capsules "
            "or routing. The papers compare capsules with such a baseline CNN."
        ),
        ("CNNs", "baseline CNN", "baseline", "convolutional network", "plain CNN"),
    ),
    "pose": Term(
        N_("pose"),
        N_("pose"),
        N_(
            "How an entity is instantiated: position, size, orientation, stroke thickness, as the papers intend a capsule to "
            "hold it. A vector's direction, or a learned 4x4 matrix; which number encodes what is learned, not given, so the "
            "pages measure it (the explorer: how much each dimension changes the drawing)."
        ),
    ),
    "vote": Term(
        "V_ij",
        N_("vote"),
        N_(
            "In matrix capsules, lower capsule i's vote for upper capsule j's pose: its pose matrix times a learned 4x4 transform (Hinton et al. Sec. 2)."
        ),
        ("votes", "V"),
    ),
    "a_in": Term(
        "a_i",
        N_("lower activation"),
        N_(
            "How present lower capsule i is (0 to 1); in EM routing it weights how much its vote counts when the upper capsules are refitted."
        ),
        ("lower activation", "a"),
    ),
    "a_j": Term(
        "a_j",
        N_("activation"),
        N_(
            "How present upper capsule j is (0 to 1): a logistic of beta_a minus the cost of its spread, sharper as lambda rises. Tight clusters of votes win."
        ),
        ("activations", "a", "logistic", "sigmoid"),
    ),
    "R": Term(
        "R_ij",
        N_("assignment"),
        N_(
            "In EM routing, the share of lower capsule i's vote that upper capsule j explains (the E-step): high when the vote fits j's Gaussian well "
            "and j is active. Each lower capsule's assignments add up to 1; at the start they are all equal."
        ),
        ("assignments", "assignment probability", "responsibility", "R"),
    ),
    "mu": Term(
        "mu_j",
        N_("mean pose"),
        N_(
            "The centre of upper capsule j's Gaussian: the assignment-weighted mean of the votes it explains (M-step). It becomes j's pose."
        ),
        ("mean", "mu", "Gaussian", "cluster"),
    ),
    "sigma": Term(
        "sigma_j",
        N_("spread"),
        N_("How far the votes j explains scatter around its mean, per pose entry (M-step). Small spread = the parts agree."),
        ("standard deviation", "sigma", "variance"),
    ),
    "lambda": Term(
        "lambda",
        N_("inverse temperature"),
        N_(
            "Sharpens the activations over the iterations: small lambda keeps every capsule partly active, larger lambda makes the decision firm. "
            "The paper raises it on a fixed schedule; capsviz ramps it linearly to its final value."
        ),
        ("temperature", "final lambda", "final inverse temperature"),
    ),
    "beta_u": Term(
        "beta_u",
        N_("cost per unit of spread"),
        N_(
            "A learned cost added per pose entry and per unit of assignment: it sets how expensive it is for a capsule to explain votes at all."
        ),
        ("beta", "cost"),
    ),
    "beta_a": Term(
        "beta_a",
        N_("activation bias"),
        N_("A learned offset in the activation's logistic: how willing an upper capsule is to switch on whatever its cost."),
        ("beta",),
    ),
    "E_step": Term(
        N_("E-step"),
        N_("assign"),
        N_(
            "EM routing's expectation step: each vote is reassigned to the upper capsules by how probable it is under each "
            "one's Gaussian, weighted by that capsule's activation; the new shares are the assignments R_ij."
        ),
        ("E step", "expectation step", "EM", "assign"),
    ),
    "M_step": Term(
        N_("M-step"),
        N_("refit"),
        N_(
            "EM routing's maximisation step: each upper capsule refits its Gaussian (mean pose mu, spread sigma) and its "
            "activation a_j to the votes assigned to it, each weighted by its assignment R_ij."
        ),
        ("M step", "maximisation step", "maximization step", "EM", "refit"),
    ),
    "spread_loss": Term(
        N_("spread loss"),
        N_("spread loss"),
        N_(
            "Training pushes the correct class's activation above every other class's by a margin that grows during training (Hinton et al. Sec. 3.1)."
        ),
    ),
    "uniform": Term(
        "c_ij = 1/J",
        N_("uniform couplings"),
        N_(
            "No routing: every lower capsule splits its prediction equally over the J upper capsules. "
            "Dynamic routing with one iteration is exactly this, since b starts at 0."
        ),
        ("uniform", "uniform split", "no routing", "1/J"),
    ),
    "random_couplings": Term(
        "c_i = softmax(r_i)",
        N_("fixed random couplings"),
        N_(
            "A baseline: each lower capsule splits its prediction by a softmax of random numbers r_i drawn once from a fixed seed "
            "and never changed, so the split is uneven but owes nothing to agreement."
        ),
        ("random couplings", "random", "r_i"),
    ),
    "self_attention": Term(
        "a_ji",
        N_("self-attention agreement"),
        N_(
            "Efficient-CapsNet's routing, in one pass: how well prediction u_hat_j|i agrees with all the predictions for class j, "
            "a_ji = sum_k u_hat_j|i . u_hat_j|k / sqrt(D), D being a prediction's number of dimensions (16): the division keeps "
            "the sums of many products from growing with D. The couplings c_ij are the softmax of a_ji over the classes; "
            "the weighted sum then adds the learned prior b_ji to each."
        ),
        ("self-attention", "self-attention routing", "attention", "a_ji"),
    ),
    "prior": Term(
        "b_ji",
        N_("learned prior"),
        N_(
            "Efficient-CapsNet's log prior: one number per lower capsule i and class j, learned in training and the same for "
            "every image. It is added to the coupling, s_j = sum_i (c_ij + b_ji) u_hat_j|i, so it says how much capsule i feeds "
            "class j whatever the image shows; where c_ij + b_ji is below 0, prediction i pulls s_j the opposite way. "
            "(Not dynamic routing's b_ij, which starts at 0 for every image.)"
        ),
        ("log prior", "prior"),
    ),
    "efficient_squash": Term(
        "v = (1 - 1/e^|s|) s / |s|",
        N_("Efficient-CapsNet's squash"),
        N_(
            "Like Eq. 1's squash it keeps the direction and gives a length between 0 and 1, but the length is 1 - e^-|s|: "
            "|s| = 1 gives 0.63 where Eq. 1 gives 0.50, so short vectors keep more of their length."
        ),
    ),
    "entropy": Term(
        N_("evenness"),
        N_("how evenly a vote is spread"),
        N_(
            "How evenly a lower capsule spreads its vote over the J capsules it can send it to: 100% when each gets the same "
            "share (1/J, the uniform split), 0% when one gets all of it. It is the entropy of its couplings as a share of the "
            "even split's entropy, log J."
        ),
        ("entropy", "entropy ratio", "% of uniform", "undecided", "spread evenly"),
    ),
    "epsilon": Term(
        "epsilon",
        N_("attack size"),
        N_(
            "How far an attack may change each pixel (pixels run from 0 to 1): 0.1 lets every pixel move by up to a tenth of "
            "the way from black to white. Larger epsilon, stronger attack, and a more visibly changed image."
        ),
        ("attack size", "eps"),
    ),
    "fgsm": Term(
        "FGSM",
        N_("one-step attack"),
        N_(
            "Fast gradient sign method: every pixel moves by epsilon in the direction that most increases the model's error, "
            "worked out from one gradient of the loss with respect to the image."
        ),
        ("fast gradient sign method", "adversarial attack", "attack", "gradient"),
    ),
    "bim": Term(
        "BIM",
        N_("many-step attack"),
        N_(
            "Basic iterative method: FGSM in 10 smaller steps, each recomputing the gradient and kept within epsilon of the "
            "original image. Usually stronger than FGSM at the same epsilon."
        ),
        ("basic iterative method", "PGD"),
    ),
    "gradient_masking": Term(
        N_("gradient masking"),
        N_("a defence that only hides the gradient"),
        N_(
            "A model can look robust to FGSM because its gradient is flat or misleading near the image, not because a small "
            "change cannot fool it: the one-step attack then aims badly. A many-step attack (BIM), or an attack that "
            "fools the model where the one-step one fails, tells the two apart."
        ),
        ("masked gradients", "obfuscated gradients"),
    ),
    "targeted": Term(
        N_("targeted"),
        N_("attack towards a chosen class"),
        N_(
            "Untargeted attacks push the image away from its true class (accuracy should fall); targeted ones pull it towards "
            "one chosen wrong class (the success rate is how often the model then says that class)."
        ),
        ("untargeted", "success rate"),
    ),
    "affine": Term(
        N_("affine transform"),
        N_("rotate, scale, shear, move"),
        N_(
            "A change of the image that keeps straight lines straight: rotation, scaling, shearing and shifting. The capsule "
            "papers claim capsules cope better with poses they did not see in training."
        ),
        ("affine", "rotate", "scale", "shear", "shift", "shifted & turned", "affNIST"),
    ),
    "test_error": Term(
        N_("test error"),
        N_("share of test images got wrong"),
        N_(
            "Of the images the model never saw in training, the percentage it classifies wrongly: 0.5% is 50 of 10,000. "
            "On MultiMNIST an image counts as right only when both its digits are the two longest capsules."
        ),
        ("error", "test error %", "accuracy", "error rate", "test set", "test images"),
    ),
    "pair_error": Term(
        N_("pair error"),
        N_("the share of two-digit images read wrong"),
        N_(
            "On MultiMNIST a test image holds two overlapping digits; a pair counts as right when both digits are among the "
            "two longest class capsules. The pair error is the share of pairs that are not (100% minus the pair accuracy): "
            "the zoo card's figure for a MultiMNIST model."
        ),
        ("pair accuracy", "pair acc.", "MultiMNIST error"),
    ),
    "digit_error": Term(
        N_("digit error"),
        N_("the error on one digit alone"),
        N_(
            "The routing lab runs a MultiMNIST model on single MNIST digits placed alone in its 36x36 frame: its digit "
            "error is the share of those it reads wrong. It is lower than the pair error, which asks for two digits at once."
        ),
        ("single-digit error",),
    ),
    "nats": Term(
        N_("nats"),
        N_("the unit of entropy with natural logarithms"),
        N_(
            "Entropy measured with the natural logarithm is in nats: a capsule splitting its vote evenly over 10 classes has "
            "log 10 = 2.30 nats, one giving all of it to one class has 0. The pages say evenness instead, the entropy as a "
            "share of the even split's: 100% and 0% for these two."
        ),
        ("nat",),
    ),
    "percentile": Term(
        N_("percentile"),
        N_("the value below which that share of measurements falls"),
        N_(
            "The 95th percentile (p95) of a set of timings is the time that 95% of them beat: a target on p95 says how long "
            "nearly every answer takes, not just the typical one (the median, p50)."
        ),
        ("p95", "p50", "median", "95th percentile"),
    ),
    "segmentation": Term(
        N_("segmentation"),
        N_("telling which pixels belong to which digit"),
        N_(
            "On MultiMNIST the decoder redraws each of the two digits from its own class capsule alone; colouring each "
            "redrawing separately shows which pixels the network gives to which digit (Fig. 5 of Sabour et al.)."
        ),
        ("segment", "segmenting"),
    ),
    "cross_entropy": Term(
        N_("cross-entropy"),
        N_("the usual classification loss"),
        N_(
            "The loss of the baseline CNNs: minus the log of the probability the network gives the right class. CapsNets "
            "use the margin loss on capsule lengths instead."
        ),
        ("cross entropy", "log loss", "softmax loss"),
    ),
    "white_box": Term(
        N_("white-box attack"),
        N_("an attack that may read the model's own gradients"),
        N_(
            "FGSM is a white-box attack: it moves each pixel a little in the direction that raises the model's own loss, "
            "computed from the model's weights."
        ),
        ("white box", "white-box"),
    ),
    "receptive_field": Term(
        N_("receptive field"),
        N_("the input area a unit sees"),
        N_(
            "The part of the layer below that one unit (or capsule) is computed from: a 3x3 receptive field is a 3 by 3 "
            "patch of positions of the layer below."
        ),
        ("receptive fields",),
    ),
    "log_linear": Term(
        N_("log-linear"),
        N_("a straight line on a log scale"),
        N_(
            "A schedule or curve is log-linear when its logarithm changes by the same amount each step: the learning rate "
            "multiplied by the same factor every so many steps, for example."
        ),
        ("log linear", "exponential decay"),
    ),
    "chance": Term(
        N_("chance"), N_("what other test images alone could give"), RULES["chance"], rule="chance", also=("± chance", "chance gives")
    ),
    "guessing": Term(
        N_("guessing"),
        N_("the error of guessing at random"),
        RULES["guessing"],
        rule="guessing",
        also=("guessing at random", "chance level", "1 - 1/J", "random guess"),
    ),
    "standard_error": Term(
        N_("standard error"),
        N_("how much a measured rate could move"),
        N_(
            "An error rate measured on n test images would come out a little different on n other images: its standard "
            "error is about sqrt(p (1 - p) / n) for a rate p. The pages show ± two standard errors, within which about 95% "
            "of such measurements fall, so 0.50% ± 0.14 on 10,000 images means anything from 0.36% to 0.64% is as likely."
        ),
        ("standard errors", "±", "two standard errors", "SE", "noise", "standard deviation of the mean"),
    ),
    "near_uniform": Term(
        N_("near uniform"), N_("near uniform couplings"), RULES["near uniform"], rule="near uniform", also=("away from uniform",)
    ),
    "long_votes": Term(
        N_("long votes"),
        N_("the length-weighted share"),
        RULES["long votes"],
        rule="long votes",
        also=("length-weighted share", "weighted by prediction length", "weighted by vote length", "long predictions"),
    ),
    "draws_nothing": Term(
        N_("draws almost nothing"),
        N_("a faint reconstruction"),
        RULES["draws almost nothing"],
        rule="draws almost nothing",
        also=("faint",),
    ),
    "changes_nothing": Term(
        N_("changes almost nothing"),
        N_("an offset that barely changes the drawing"),
        RULES["changes almost nothing"],
        rule="changes almost nothing",
        also=("pixel change",),
    ),
    "beyond_chance": Term(
        N_("beyond chance"),
        N_("a difference beyond chance"),
        RULES["beyond chance"],
        rule="beyond chance",
        also=("within chance", "significant"),
    ),
    "rises_falls": Term(
        N_("rises / falls"),
        N_("rises or falls"),
        RULES["rises / falls"],
        rule="rises / falls",
        also=("rises", "falls", "stays about level", "trend"),
    ),
    "peaks_dips": Term(
        N_("peaks / dips"),
        N_("rises, then falls (or falls, then rises)"),
        RULES["peaks / dips"],
        rule="peaks / dips",
        also=("then falls", "then rises", "peak", "dip"),
    ),
    "faster": Term(N_("faster"), N_("faster"), RULES["faster"], rule="faster", also=("slower", "speed", "ms / image", "timing", "timings")),
    "busy": Term(N_("busy"), N_("a busy machine"), RULES["busy"], rule="busy", also=("load average", "quiet machine", "loaded machine")),
    "small_span": Term(
        N_("small span"),
        N_("a coupling map's small span"),
        RULES["small span"],
        rule="small span",
        also=("exaggerate small differences", "span"),
    ),
    "mnist": Term(
        "MNIST",
        N_("handwritten digits"),
        N_("70,000 handwritten digits, 28x28 grey pixels: 60,000 to train on and 10,000 to test. Both capsule papers report on it."),
        ("digits", "Fashion-MNIST", "fashion-mnist"),
    ),
    "multimnist": Term(
        "MultiMNIST",
        N_("two overlapping digits"),
        N_(
            "Sabour et al.'s test of telling overlapping objects apart (Sec. 6): two MNIST digits of different classes, each "
            "shifted by up to 4 pixels, overlaid on a 36x36 image. The model must name both digits, and the decoder redraws each one from its own capsule."
        ),
        ("multi-mnist", "overlapping digits", "pair", "pairs", "MultiMNIST pairs"),
    ),
    "smallnorb": Term(
        "smallNORB",
        N_("toy objects under many viewpoints"),
        N_(
            "Photographs of 50 toys in 5 classes under many viewpoints and lightings, on which Hinton et al. measure matrix capsules; capsviz does not train on it yet."
        ),
        ("NORB",),
    ),
    "epoch": Term(
        N_("epoch"),
        N_("one pass over the training images"),
        N_("One pass of training over every training image. After each epoch capsviz measures the test error and saves a checkpoint."),
        ("epochs",),
    ),
    "batch": Term(
        N_("batch"),
        N_("images per training step"),
        N_(
            "The images the model learns from in one step: their losses are averaged, and the weights move once. Batch size "
            "is how many; one epoch has (training images / batch size) steps."
        ),
        ("batch size", "mini-batch", "step", "steps"),
    ),
    "learning_rate": Term(
        N_("learning rate"),
        N_("step size"),
        N_(
            "How far each training step moves the weights (the Adam optimiser's step size). capsviz multiplies it by 0.96 "
            "every N steps (the learning-rate decay), so that training settles."
        ),
        ("learning-rate decay", "lr", "decay", "Adam", "optimiser", "optimizer"),
    ),
    "seed": Term(
        N_("seed"),
        N_("the starting random numbers"),
        N_(
            "The number that fixes a run's random choices: its starting weights, the order of its images and its "
            "augmentation. Two runs that differ only in their seed show how much of a result is luck."
        ),
        ("seeds", "training seed", "random seed"),
    ),
    "softmax": Term(
        "softmax",
        N_("shares that add up to 1"),
        N_(
            "Turns a list of numbers into positive shares that add up to 1, the largest number getting the largest share: "
            "each number's exponential divided by the sum of all their exponentials."
        ),
        ("soft max",),
    ),
    "sum": Term(
        "sum_i",
        N_("sum over i"),
        N_("Adds up what follows it for every value of i (every lower capsule); sum_k and sum_l do the same over k or l."),
        ("sum_k", "sum_l", "sum"),
    ),
    "convcaps": Term(
        "ConvCaps",
        N_("convolutional capsule layer"),
        N_(
            "A matrix-capsule layer whose capsules each see a small window (K x K positions) of the layer below, as a "
            "convolution does; ConvCaps1 and ConvCaps2 come before the class capsules. Their outputs sit on a grid of positions."
        ),
        ("ConvCaps1", "ConvCaps2", "convcaps1", "convcaps2", "output position", "position"),
    ),
    "equivariance": Term(
        N_("equivariance"),
        N_("output that changes with the pose"),
        N_(
            "A network is equivariant to a change of its input (a shift, a turn) when its output changes with it in a way "
            "that can be read back: the capsule's vector turns when the digit turns, while its length, the answer, stays. "
            "The chapter on why capsules measures it on the shipped models."
        ),
        ("equivariant", "equivariance vs invariance"),
    ),
    "invariance": Term(
        N_("invariance"),
        N_("output that stays whatever the pose"),
        N_(
            "A network is invariant to a change of its input when its output stays the same: a CNN's answer should not change "
            "when the digit moves a pixel. The papers argue that pooling buys it by throwing away where things are."
        ),
        ("invariant", "translation invariance"),
    ),
    "pooling": Term(
        N_("pooling"),
        N_("keeping the largest value of a patch"),
        N_(
            "Max-pooling replaces each small patch of a feature map (2x2, say) by its largest value: the feature is kept, "
            "where exactly it was in the patch is lost. The baseline CNNs pool; capsule networks route instead."
        ),
        ("max-pooling", "max pooling", "pooled features", "pooled", "MaxPool"),
    ),
    "viewpoint": Term(
        N_("viewpoint"),
        N_("where the object is seen from"),
        N_(
            "The position and angle of the camera relative to the object. A change of viewpoint changes every part's pose "
            "the same way, so in matrix capsules the votes of the parts should move together and still agree."
        ),
        ("viewpoints", "change of viewpoint", "novel viewpoints"),
    ),
    "inverse_graphics": Term(
        N_("inverse graphics"),
        N_("rendering run backwards"),
        N_(
            "Graphics turns a description of objects and their poses into pixels; vision as inverse graphics recovers the "
            "description from the pixels: the parts, their poses, and the wholes whose parts' poses fit together. A "
            "capsule's numbers are meant to be that description, and the decoder draws from them."
        ),
        ("inverse rendering", "rendering"),
    ),
    "coordinate_addition": Term(
        N_("coordinate addition"),
        N_("a vote told where its part sits"),
        N_(
            "In matrix capsules (Hinton et al. 2018, section 3), the scaled row and column of each capsule's receptive-field "
            "centre are added to the first two entries of the last column of its vote for a class, so the vote carries the "
            "part's position in the picture, which a weight shared across positions cannot know."
        ),
        ("coordinate addition", "coord_add", "coordinates", "with coordinate addition", "without coordinate addition"),
    ),
    "parse_tree": Term(
        N_("parse tree"),
        N_("which part belongs to which whole"),
        N_(
            "The hierarchy of parts and wholes in an image: each active capsule is a node, and routing decides which higher "
            "capsule (whole) each lower capsule (part) belongs to, carving a tree out of the network for each image."
        ),
        ("parse trees", "part-whole hierarchy", "part-whole"),
    ),
    "qr_code": Term(
        N_("QR code"),
        N_("a picture of an address a phone camera reads"),
        N_(
            "A square of black and white modules that holds a text, here the address of the view on the screen: a student "
            "points a phone's camera at the projected code and opens exactly that view."
        ),
        ("QR",),
    ),
    "nearly_invariant": Term(
        N_("nearly invariant"),
        N_("a representation that barely changes"),
        RULES["nearly invariant"],
        rule="nearly invariant",
        also=("barely changes",),
    ),
    "dimension_moves": Term(
        N_("dimension moves"),
        N_("a capsule dimension that changes by a slider step"),
        RULES["dimension moves"],
        rule="dimension moves",
        also=("dimensions that move",),
    ),
    "follows_digit": Term(
        N_("follows the digit"),
        N_("a reconstruction that moves with the digit"),
        RULES["follows the digit"],
        rule="follows the digit",
        also=("reconstruction follows",),
    ),
    "move_together": Term(
        N_("move together"),
        N_("votes that travel as one cloud"),
        RULES["move together"],
        rule="move together",
        also=("moves together", "votes move together"),
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


# The names a Chinese or Japanese reader knows a term by, as the translations of the papers and
# their explainers write them (../shared/TERMS.md), beside each entry's own words in the catalogs
# (`translated`): the search finds 胶囊, 耦合系数, カプセル or 結合係数 as it finds "coupling coefficient".
TRANSLATED: dict[str, tuple[str, ...]] = {
    "capsule": ("胶囊", "カプセル"),
    "capsnet": ("胶囊网络", "カプセルネットワーク"),
    "dynamic_routing": ("动态路由", "协议路由", "動的ルーティング", "合意によるルーティング"),
    "routing": ("路由", "ルーティング"),
    "agreement": ("一致", "一致性"),
    "iteration": ("路由迭代", "迭代", "反復"),
    "c": ("耦合系数", "結合係数"),
    "b": ("对数先验", "ロジット"),
    "squash": ("挤压", "挤压函数", "压缩函数", "squashing関数", "非線形性"),
    "v": ("激活向量", "活性ベクトル"),
    "length": ("长度", "長さ"),
    "u_hat": ("预测向量", "予測ベクトル"),
    "primary": ("主胶囊", "一次カプセル", "PrimaryCapsules"),
    "digitcaps": ("数字胶囊", "数字カプセル"),
    "margin_loss": ("边缘损失", "マージン損失"),
    "reconstruction": ("重建", "重构", "重建损失", "重构损失", "解码器", "再構成", "再構成損失", "デコーダ"),
    "conv1": ("卷积", "畳み込み"),
    "affine": ("仿射变换", "アフィン変換"),
    "multimnist": ("重叠", "重なり", "重複"),
    "pose": ("姿态", "姿态矩阵", "ポーズ", "姿勢"),
    "vote": ("投票",),
    "em_routing": ("EM路由", "期望最大化", "EMルーティング", "期待値最大化"),
    "R": ("分配概率",),
    "a_j": ("激活概率",),
    "mu": ("均值", "高斯", "混合", "聚类", "平均", "ガウス", "クラスタリング"),
    "sigma": ("方差", "分散"),
    "spread_loss": ("传播损失",),
    "E_step": ("E步", "Eステップ"),
    "M_step": ("M步", "Mステップ"),
    "softmax": ("ソフトマックス",),
    "test_error": ("测试错误率", "テスト誤り率"),
    "epoch": ("轮次", "エポック"),
    "batch": ("批次", "バッチ"),
    "learning_rate": ("学习率", "学習率"),
    "invariance": ("不变性", "不変性"),
    "equivariance": ("同变性", "等变", "等变性", "同変性"),
    "pooling": ("最大池化", "池化", "マックスプーリング", "プーリング"),
    "viewpoint": ("视角", "視点"),
    "coordinate_addition": ("坐标加成",),
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
    """'c_ij (coupling)': a symbol with its plain word beside it, in the reader's language."""
    return term(key).named_in()


def help_text(*keys: str) -> str:
    """Markdown for a widget's `help=`: each term in bold with its explanation, one per paragraph."""
    return "\n\n".join(t("**{term}**: {explanation}", term=label(k), explanation=term(k).explain()) for k in keys)


def links(keys, lang: str) -> str:
    """Markdown: each entry's name in the reader's language, a link to it on the glossary page
    (its search by the English name, which puts that entry first; `lang` keeps the reader's
    language in the page the link opens)."""
    return " · ".join(f"[{plain(label(k))}](glossary?term={quote(term(k).english)}&lang={quote(lang)})" for k in dict.fromkeys(keys))


def _norm(name: str) -> str:
    """A name as search compares it: lower case, without spaces, hyphens, underscores, brackets,
    quotes or a plural s."""
    k = re.sub(r"[\s_\-（）「」・]+", "", name.lower())
    return k[:-1] if len(k) > 3 and k.endswith("s") and not k.endswith("ss") else k


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


@cache
def translated(key: str) -> tuple[str, ...]:
    """An entry's Chinese and Japanese names: TERMS.md's (TRANSLATED) and its symbol and word as each
    catalog translates them."""
    entry, found = TERMS[key], list(TRANSLATED.get(key, ()))
    for lang in FOLDERS:
        with speaking(lang):
            found += [entry.word_in(), entry.symbol_in()]
    return tuple(n for n in dict.fromkeys(found) if n not in (entry.word, entry.symbol))


@cache
def _translated_text(key: str) -> str:
    """An entry's words and explanation in every language but English, for a search in their letters."""
    entry, said = TERMS[key], []
    for lang in FOLDERS:
        with speaking(lang):
            said += [entry.symbol_in(), entry.word_in(), entry.explain()]
    return " ".join(said)


def names(key: str) -> tuple[str, ...]:
    """Every name of an entry: its key, symbol, plain word, the papers' term, the names it also goes
    by and its Chinese and Japanese names (`translated`)."""
    entry = TERMS[key]
    return (
        key,
        entry.symbol,
        entry.word,
        *((entry.paper,) if entry.paper else ()),
        *entry.also,
        *(a for a, k in ALIASES.items() if k == key),
        *translated(key),
    )


def lookup(name: str) -> list[Term]:
    """The entries known by `name` (a symbol, a word, the papers' term or a synonym, in English,
    Chinese or Japanese: "c_ij", "coupling coefficient", "E-step", "耦合系数", "結合係数"); a
    subscripted symbol not found as it is is looked up without its last subscript ("u_hat_j|k" finds
    u_hat, "s_j" finds s)."""
    want = _norm(name.strip().strip("|"))
    found = [TERMS[k] for k in TERMS if any(_norm(n) == want for n in names(k))]
    head, sep, _ = name.strip().strip("|").rpartition("_")
    return found if found or not sep else lookup(head)


def entries(query: str = "") -> list[Term]:
    """Every entry in teaching order, or those that `query` finds (case ignored): first the entries
    known by that name (`lookup`), then those with a name that holds it (for a query of four letters
    or more, or two Chinese or Japanese characters), then those whose explanation mentions it (a whole
    word for a query of three letters or fewer, so that "EM" is not found inside "them"; in every
    language for a query in Chinese or Japanese). The glossary page lists them, with the same text as
    the hover help."""
    q = query.strip()
    if not q:
        return list(TERMS.values())
    named = lookup(q)
    nq = _norm(q)
    cjk = bool(_CJK.search(q))
    longer = len(nq) > 3 or (cjk and len(nq) > 1)
    partly = [TERMS[k] for k in TERMS if longer and any(nq in _norm(n) for n in names(k))]
    short = len(q) <= 3 and not cjk
    word = re.compile(rf"(?<![\w-]){re.escape(q)}(?![\w-])" if short else re.escape(q), re.IGNORECASE)
    mentioned = [
        entry
        for k, entry in TERMS.items()
        if word.search(f"{entry.symbol} {entry.word} {entry.explanation}") or (not q.isascii() and word.search(_translated_text(k)))
    ]
    return list(dict.fromkeys([*named, *partly, *mentioned]))


# The plural of each class capsule word, as the catalog has it
_PLURAL = {"digit capsule": N_("digit capsules"), "class capsule": N_("class capsules")}


@dataclass(frozen=True)
class ClassWords:
    """What the pages call a model's class capsules and what they stand for. The fields hold the
    English (the catalog's messages); reading a word gives it in the reader's language."""

    digits: bool  # trained on handwritten digits (MNIST and the sets made from it)
    capsule_en: str  # "digit capsule" / "class capsule"
    thing_en: str  # what one class capsule stands for: "digit" / "class"
    things_en: str
    shown_en: str  # what one input shows, and the decoder redraws: "digit" / "object"
    pictures_en: str  # the test set's items: "digits" / "images"

    @property
    def capsule(self) -> str:
        return t(self.capsule_en)

    @property
    def capsules(self) -> str:
        return t(_PLURAL.get(self.capsule_en, self.capsule_en + "s"))

    @property
    def thing(self) -> str:
        return t(self.thing_en)

    @property
    def things(self) -> str:
        return t(self.things_en)

    @property
    def shown(self) -> str:
        return t(self.shown_en)

    @property
    def pictures(self) -> str:
        return t(self.pictures_en)


DIGIT_WORDS = ClassWords(True, N_("digit capsule"), N_("digit"), N_("digits"), N_("digit"), N_("digits"))
CLASS_WORDS = ClassWords(False, N_("class capsule"), N_("class"), N_("classes"), N_("object"), N_("images"))


def class_words(model) -> ClassWords:
    """The words for a model's class capsules: `model` is its checkpoint metadata (its
    `image_dataset` decides) or a dataset's name. Digits only for the digit datasets (MNIST,
    MultiMNIST, affNIST); Fashion-MNIST and a user's own images have classes."""
    dataset = model if isinstance(model, str) else model.image_dataset
    found = DATASETS.get(dataset)
    return DIGIT_WORDS if found is not None and found.source == "mnist" else CLASS_WORDS
