"""One meaning per name: a public name (no leading underscore) defined at the top of two modules of
capsviz/ or pages/ must be one of the few kept on purpose below, each with its reason; and every
public function is used somewhere (the app, the core, the site's JavaScript or the tests).

Every module is parsed with ast (nothing is imported). In pages/ a page script's lowercase
variables are the script's own and are left out; its functions, classes and CONSTANTS (two letters or more: T is a slider's iteration count) count.
"""

from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Names defined in more than one module on purpose: name -> why
ALLOWED = {
    "LARGE": "a page's projector text size (pages.projector.big()), read by each page that enlarges its figures",
    # message tables: each module's own sentences, defined once there (the site's build exports them)
    "MESSAGES": "a module's own table of messages (N_), which its functions say and the static site exports",
    "COUNTED": "a module's own table of plural messages (Nn_), beside its MESSAGES",
    # the registry's hooks: one per family folder, each found through the family's entry
    "FAMILY": "a family folder's registry entry (capsviz.registry reads FAMILY from each folder)",
    "PRESETS": "a family's named configs; capsviz.config.PRESETS is all of them together",
    "TOUR": "a family's tour, named by its entry's `tour` hook",
    "walk": "a family's tour walk; capsviz.analysis.tour.walk picks the family whose trace it is and calls its walk",
    "training_votes": "a routed family's memory hook, named by its entry's `votes`",
    "primary_layout": "a family's layout hook, named by its entry's `layout`",
    "main": "each command line's entry point",
    # each dataset module's own table, the same thing for its dataset
    "CLASS_NAMES": "each dataset module's class names",
    "SIZE": "each dataset module's canvas side (affNIST-like 40, MultiMNIST 36); pages/multimnist.py imports MultiMNIST's",
    "download": "fetching a dataset: smallnorb's own files, sources' for the IDX datasets",
    "locate": "finding a dataset's files: smallnorb's own, sources' for the IDX datasets",
    "describe": "what a module's subject holds: a checkpoint in a phrase (checkpoint), a dataset's DatasetInfo (data)",
    "precompute": "each package's shipped results, computed and stored: the lab's rows, the robustness sweeps, the Why chapter's sweeps",
    "em_routing": "the compiled fast path of capsviz.routing.em_routing, tested equal to it (tests/test_kernels*.py)",
    "checkpoint_dir": "the model folder: the app's (beside app.py unless $CAPSVIZ_CHECKPOINTS) and the CLI's (the user folder when installed)",
    "guesses": "(classes, labels per image) that guessing at random counts from: a checkpoint's (zoo) and a training run's (Train page)",
    "placeholders": "a message's {names}: read with Python's Formatter (translations) and as the site's JavaScript fills them (site.words)",
    "table": "a module's results as its table: the lab's rows (lab.tables) and the benchmarks' (bench)",
    "measure": "measuring one thing into one result: a model with a routing (lab) and a preset's speed (bench)",
    "fits": "whether a thing fits: a model the lab can swap routings of (lab) and a run's memory on its device (cli.train)",
    # a page script's own helper, never imported: named for what it draws on that page
    "RULES": "pages/playground.py's routing rules to pick (a page script's own); analysis.rules.RULES is the sentence rules",
    "em_frame": "pages/tour.py's frame of its EM figure (a page script's own), drawn by viz.teach.em_frame",
    "number": "pages/playground.py's table column (a page script's own); cli.arguments.number is an argparse type",
    "run": "pages/lab.py's long job (a page script's own); cli.run runs one command line",
    # two meanings in modules other changes own (capsviz/site, the lab, the playground, the classroom)
    "ITERATIONS": "each module's own count: the lab runs dynamic routing with 3 (lab), the site's dynamic graph records 10 (site.export)",
    "VIEWS": "the site's views: an app page's view (site.links) and each view's words (site.words)",
    "TABLE": "analysis.rules' table of rules and analysis.playground's decimals in its tables",
    "split_words": "a split in a sentence: a toy's couplings (analysis.playground) and a class's answers (analysis.questions)",
    "label": "a name as shown: a person's (access) and a glossary term's (glossary)",
    "DATASET_NAMES": "the datasets' names: their keys (config) and as the reproduction tables print them (analysis.reproduction)",
    "said": "kept words in the reader's language: the class's stored words (analysis.questions) and a Sentence (i18n)",
    "wrap": "text broken into lines: at terminal columns (cli.arguments) and at pixels of a font (viz.teach)",
}


def module_files() -> list[Path]:
    return [p for base in ("capsviz", "pages") for p in sorted((ROOT / base).rglob("*.py")) if "node_modules" not in p.parts]


def public_names(path: Path, source: str | None = None) -> set[str]:
    """The public names a module defines at its top level: functions, classes and assignments (in
    a page script, its CONSTANTS only: its lowercase variables are the script's own)."""
    page = path.parent.name == "pages"
    found = set()
    for node in ast.parse(path.read_text() if source is None else source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and (not page or (target.id.isupper() and len(target.id) > 1)):
                    found.add(target.id)
    return {n for n in found if not n.startswith("_")}


def defined_twice(modules: dict[Path, set[str]]) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path, names in modules.items():
        for name in names:
            where[name].append(str(path.relative_to(ROOT)))
    return {name: sorted(paths) for name, paths in where.items() if len(paths) > 1}


def test_no_public_name_is_defined_twice_without_a_reason():
    twice = defined_twice({p: public_names(p) for p in module_files()})
    new = {name: paths for name, paths in twice.items() if name not in ALLOWED}
    assert not new, "names defined in two modules (remove one, rename one, or give the reason in ALLOWED):\n" + "\n".join(
        f"{name}: {', '.join(paths)}" for name, paths in sorted(new.items())
    )
    stale = sorted(set(ALLOWED) - set(twice))
    assert not stale, f"ALLOWED keeps names no longer defined twice: {stale}"


def test_the_scan_sees_functions_classes_and_constants_but_not_a_page_scripts_variables():
    source = "AB = 1\nT = 0\nb: int = 2\n_c = 3\ndef f(): pass\nclass K: pass\nif True:\n    d = 4\n"
    assert public_names(ROOT / "capsviz" / "planted.py", source) == {"AB", "T", "b", "f", "K"}
    assert public_names(ROOT / "pages" / "planted.py", source) == {"AB", "f", "K"}  # T: a slider's value, as papers name it
    twice = defined_twice({ROOT / "capsviz" / "a.py": {"f", "g"}, ROOT / "capsviz" / "b.py": {"f"}})
    assert twice == {"f": ["capsviz/a.py", "capsviz/b.py"]}


def test_every_public_function_is_used_somewhere():
    """A function nothing calls is removed, with the tests that only tested it (CONTRIBUTING.md)."""
    files = [*module_files(), ROOT / "app.py", *sorted((ROOT / "tests").rglob("*.py"))]
    files += [p for p in (ROOT / "capsviz" / "site" / "web").rglob("*.js") if "node_modules" not in p.parts]
    words = Counter(w for p in files for w in re.findall(r"\w+", p.read_text()))
    unused = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path in module_files()
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and words[node.name] <= 1  # its own def alone
    ]
    assert not unused, "functions nothing uses (remove them):\n" + "\n".join(unused)
