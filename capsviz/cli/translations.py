"""capsviz translations: the Chinese and Japanese catalogs brought up to date, checked, and their fonts cut."""

from __future__ import annotations

from capsviz.i18n import t, tn


def add_translations(sub) -> None:
    """`translations` and its options."""
    ts = sub.add_parser(
        "translations",
        help=t("bring the Chinese and Japanese catalogs up to date with the code's messages (needs a source checkout)"),
    )
    ts.add_argument("--check", action="store_true", help=t("change nothing; exit 1 naming each message untranslated or broken"))
    ts.add_argument(
        "--fonts",
        action="store_true",
        help=t("cut the export fonts to the catalogs' characters (needs fontTools and fonts-noto-cjk)"),
    )


def cmd_translations(args) -> int:
    from capsviz import translations

    if args.check:
        found = translations.problems()
        print("\n".join(found) if found else t("every message is translated"))
        return 1 if found else 0
    if args.fonts:
        for lang, size in translations.cut_fonts().items():
            print(f"capsviz/fonts/{lang}.otf: {size / 1024:.0f} KB")
        return 0
    for lang, missing in translations.update().items():
        print(tn("{language}: {n} message to translate", "{language}: {n} messages to translate", missing, language=lang))
    return 0
