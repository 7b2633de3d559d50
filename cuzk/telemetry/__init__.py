"""Telemetry: Prometheus metrics computed from engine state, OpenTelemetry tracing setup."""
