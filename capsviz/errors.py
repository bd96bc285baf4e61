"""The one exception type for mistakes a user can cause (bad data, bad checkpoint, bad option)."""


class CapsvizError(Exception):
    """Says what was expected and how to fix it; pages show it with st.error, the CLI exits 2."""


def first_line(e: BaseException) -> str:
    """An exception's message in one line of at most 200 characters (the user's code's errors,
    said inside one of ours)."""
    return (str(e).strip().splitlines() or [""])[0][:200]
