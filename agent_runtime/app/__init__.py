"""The assembly, above every other package of the runtime: ``settings`` (read once at start-up) and ``factory``
(builds the runtime and its Starlette app: core, REST and Kubernetes channels, routes).

Import :mod:`agent_runtime.app.factory` before anything else that imports a2a-sdk's server (it imports a2a-sdk
without grpc); this ``__init__`` imports nothing.
"""

__all__: list[str] = []
