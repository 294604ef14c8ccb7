# One image for both halves of Gatehouse.
#
#   runtime (default):  docker run IMAGE serve --config /etc/gatehouse/config.json
#                       = gatehouse-runtime serve --config ...   (the operator sets the args per Agent)
#   operator:           docker run --entrypoint kopf IMAGE run -m gatehouse_operator --standalone --all-namespaces
#                       = kopf run -m gatehouse_operator ...   (the Helm chart sets command: [kopf] and these args)
#
# Build: docker build -t gatehouse:dev .     Only what .dockerignore lets through is copied.
# BASE: any image with Python 3.11+ and its venv module, e.g. a Debian bookworm made with debootstrap
# (`buildah bud --build-arg BASE=... .`, docs/control-plane.md "The real node"). The project goes into a virtual
# environment: a Debian base's system Python refuses `pip install` (PEP 668), and python:3.11-slim accepts both.
ARG BASE=python:3.11-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/gatehouse/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

WORKDIR /src
COPY . .
# The postgres extra (asyncpg): an Agent with spec.state.postgres runs this same image. The otel extra (the OTLP
# exporter): approval waits become spans wherever OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/audit.md). The litellm
# extra: a ModelConfig for OpenAI, Anthropic, Ollama or any OpenAI-compatible server (docs/models.md); it is
# imported on an Agent's first model call, so an Agent on another provider does not load it.
RUN python3 -m venv --upgrade-deps /opt/gatehouse \
    && pip install ".[postgres,otel,litellm]" \
    && rm -rf /src \
    && useradd --uid 10001 --user-group --create-home --home-dir /home/gatehouse gatehouse

WORKDIR /home/gatehouse
# Numeric, so that Kubernetes can verify runAsNonRoot.
USER 10001:10001

# The runtime's A2A server, or the operator's liveness endpoint (--liveness=http://0.0.0.0:8080/healthz).
EXPOSE 8080

ENTRYPOINT ["gatehouse-runtime"]
CMD ["serve", "--config", "/etc/gatehouse/config.json"]
