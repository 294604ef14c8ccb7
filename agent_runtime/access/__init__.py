"""Who is calling: every channel's credential (token file, JWT, Kubernetes TokenReview) becomes one principal.

:mod:`~agent_runtime.access.authenticator` is the one place a request's ``Authorization`` header is checked;
:mod:`~agent_runtime.access.middleware` puts it in front of every route but the public ones.
"""
