"""What the runtime counts and traces: Prometheus metrics on the runtime's own registry, OpenTelemetry spans for
approval waits.
"""
