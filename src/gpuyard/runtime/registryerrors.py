"""Is a failed pull worth another try? skopeo's error line, sorted into transient or permanent.

A pull that fails for a reason the registry or the network may get over (refused or reset
connections, timeouts, DNS, 5xx, 429) is *transient*: the node tries again with a backoff. One
that no retry can mend (an unknown image or manifest, no access, a malformed reference, a
registry that speaks plain HTTP to a node that asks for TLS) is *permanent*: the task ends
`ImageError` at once. What matches neither table is permanent too, as every pull failure was
before transient ones were retried: an error we cannot name is not worth minutes of retries.

The image's own name (and its registry host) is cut out of the message before matching, so a
name such as `timeout/app:1` cannot change the verdict.
"""

from __future__ import annotations

import re

# The permanent table is read first: a 404 page that mentions a timeout is still a 404.
PERMANENT: tuple[tuple[str, str], ...] = (
    (r"manifest unknown|manifest .*not found|status(code)?: 404\b", "unknown image or manifest"),
    (r"name unknown|repository name not known", "unknown repository"),
    (r"\bunauthorized\b|authentication required|requested access to the resource is denied"
     r"|(^|: )denied\b|status(code)?: 40[13]\b", "unauthorized"),
    (r"invalid reference format|invalid source name|must be lowercase"
     r"|bad image reference", "bad reference"),
    (r"server gave http response to https client|does not look like a tls handshake"
     r"|x509: ", "TLS set-up (an insecure registry needs GPUYARD_INSECURE_REGISTRIES)"),
    (r"no image matched|choosing an image from manifest list", "no image for this platform"),
    # NXDOMAIN: the resolver answered that the registry's name does not exist (a typo); a DNS
    # server that fails to answer is transient, below
    (r"no such host", "unknown registry host"),
)

TRANSIENT: tuple[tuple[str, str], ...] = (
    (r"connection refused", "connection refused"),
    (r"connection reset|broken pipe|unexpected eof|: eof$", "connection reset"),
    (r"i/o timeout|handshake timeout|timed out|deadline exceeded|timeout awaiting"
     r"|client\.timeout", "timeout"),
    (r"server misbehaving|temporary failure in name resolution|lookup .*: i/o timeout"
     r"|lookup .* on .*:53", "DNS failure"),
    (r"network is unreachable|no route to host|host is unreachable", "network unreachable"),
    (r"http status: 5\d\d|statuscode: 5\d\d|\b50[0234] (internal|bad|service|gateway)",
     "registry error (5xx)"),
    (r"statuscode: 429|http status: 429|too many requests|toomanyrequests", "rate limited (429)"),
)


def _strip_name(message: str, name: str) -> str:
    """`message` without the image's name, its repository and its registry host, each where
    it stands as a whole (`time:1` goes from `docker://time:1:`, never from `timed out`)."""
    repo = name.rpartition(":")[0] if "/" not in name.rpartition(":")[2] else name
    host, _, rest = name.partition("/")
    registry = host if rest and ("." in host or ":" in host or host == "localhost") else ""
    for part in sorted({name, repo, registry} - {""}, key=len, reverse=True):
        message = re.sub(rf"(?<![\w.-]){re.escape(part)}(?![\w-])", "IMAGE", message)
    return message


def classify(message: str, name: str = "") -> tuple[bool, str]:
    """(transient?, what kind of failure) for a pull that failed with `message`."""
    text = _strip_name(message, name).lower() if name else message.lower()
    for pattern, kind in PERMANENT:
        if re.search(pattern, text):
            return False, kind
    for pattern, kind in TRANSIENT:
        if re.search(pattern, text):
            return True, kind
    return False, "unknown"
