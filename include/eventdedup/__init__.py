"""eventdedup: remove duplicate events from an at-least-once stream before analytics sees them.

The package imports without Airflow and without a SparkSession; Spark is imported only inside
the functions that build or drive a job.
"""
from __future__ import annotations

__version__ = "0.1.0"
