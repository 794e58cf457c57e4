"""Build reviewed, versioned, frozen multimodal neurology reasoning benchmarks."""
__version__ = "0.1.0"
