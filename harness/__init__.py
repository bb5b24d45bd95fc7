"""detbench: training-throughput benchmarks for object-detection frameworks."""

__version__ = "0.1.0"
