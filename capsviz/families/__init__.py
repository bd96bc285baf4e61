"""The model families, one folder each: `__init__.py` holds its registry entry (capsviz.entries.Family),
`config.py` its config dataclass and presets, `model.py` its nn.Module (and what its training keeps
in memory), `tour.py` the tour's walk through it. capsviz.registry.FAMILY_FOLDERS lists them."""
