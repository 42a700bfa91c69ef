"""Benchmarks: throughput measurement and the HTML dashboard."""
