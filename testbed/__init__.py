"""testbed: trace-replay emulation testbed for geo-distributed, renewable- and power-aware ML training."""

__version__ = "0.1.0"
