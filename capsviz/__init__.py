"""capsviz: watch capsule routing happen (Sabour et al. 2017; Hinton et al. 2018)."""

__version__ = "0.1.0"
