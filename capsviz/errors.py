"""The one exception type for mistakes a user can cause (bad data, bad checkpoint, bad option)."""


class CapsvizError(Exception):
    """Says what was expected and how to fix it; pages show it with st.error, the CLI exits 2."""
