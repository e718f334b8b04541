#!/usr/bin/env python3
"""Structural check of the rendered Kubernetes manifests (no cluster needed).

Usage: kubectl kustomize deploy/k8s | deploy/check-k8s.py
Reads every document from stdin and checks what must hold for the coordinator Deployment, its
Service and Secrets, and the agent DaemonSet: images, ports, secrets and their keys, probes,
selectors, node placement, resources and security contexts. Prints one line per problem and
exits 1 if there is any.
"""
import re
import sys

import yaml

problems = []


def need(cond, what):
    if not cond:
        problems.append(what)
    return cond


docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}


def one(kind, name):
    found = [d for d in by_kind.get(kind, []) if d["metadata"]["name"] == name]
    need(len(found) == 1, f"{kind}/{name}: expected exactly one, found {len(found)}")
    return found[0] if found else None


def secret_has(name, key, where):
    s = secrets.get(name)
    if need(s is not None, f"{where}: Secret {name} is not among the manifests"):
        keys = set(s.get("data", {})) | set(s.get("stringData", {}))
        need(key in keys, f"{where}: Secret {name} has no key {key!r} (has {sorted(keys)})")


def check_pod(pod, where, image_name):
    spec = pod["spec"]
    need(not spec.get("hostNetwork"), f"{where}: hostNetwork")
    need(not spec.get("hostPID") and not spec.get("hostIPC"), f"{where}: host PID/IPC namespace")
    need(spec.get("automountServiceAccountToken") is False, f"{where}: mounts a service-account token it does not need")
    psc = spec.get("securityContext", {})
    need(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0, f"{where}: pod does not run as non-root")
    need(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{where}: no RuntimeDefault seccomp profile")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for v in volumes.values():
        if "secret" in v:
            s = secrets.get(v["secret"]["secretName"])
            need(s is not None, f"{where}: volume {v['name']} uses a Secret that is not there")
            for item in v["secret"].get("items", []):
                secret_has(v["secret"]["secretName"], item["key"], f"{where} volume {v['name']}")
    containers = spec.get("containers", [])
    need(len(containers) == 1, f"{where}: expected one container")
    for c in containers + spec.get("initContainers", []):
        cw = f"{where} container {c['name']}"
        image = c.get("image", "")
        need(re.search(r":[\w.-]+$", image) and not image.endswith(":latest"), f"{cw}: image {image!r} has no pinned tag")
        sc = c.get("securityContext", {})
        need(sc.get("allowPrivilegeEscalation") is False, f"{cw}: allowPrivilegeEscalation is not false")
        need(sc.get("readOnlyRootFilesystem") is True, f"{cw}: root filesystem is writable")
        need(not sc.get("privileged"), f"{cw}: privileged")
        need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{cw}: does not drop ALL capabilities")
        need("memory" in c.get("resources", {}).get("limits", {}), f"{cw}: no memory limit")
        for m in c.get("volumeMounts", []):
            need(m["name"] in volumes, f"{cw}: mounts unknown volume {m['name']}")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                secret_has(ref["name"], ref["key"], f"{cw} env {e['name']}")
    main = containers[0] if containers else {}
    need(image_name in main.get("image", ""), f"{where}: image {main.get('image')!r} is not {image_name}")
    sc = main.get("securityContext", {})
    need(not sc.get("capabilities", {}).get("add"), f"{where}: the main container adds capabilities")
    need(sc.get("runAsUser", psc.get("runAsUser")) not in (None, 0), f"{where}: the main container runs as root")
    for c in spec.get("initContainers", []):
        added = set(c.get("securityContext", {}).get("capabilities", {}).get("add", []))
        need(added <= {"CHOWN", "FOWNER"}, f"{where} init container {c['name']}: adds {sorted(added)}")
    return main


def arg(container, flag):
    for a in container.get("args", []):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


namespaces = [n["metadata"]["name"] for n in by_kind.get("Namespace", [])]
need(namespaces == ["cipherfleet"], f"namespaces: {namespaces}")
for d in docs:
    if d["kind"] != "Namespace":
        need(d["metadata"].get("namespace") == "cipherfleet", f"{d['kind']}/{d['metadata']['name']}: not in namespace cipherfleet")

# The coordinator: Deployment, Service, Secrets.
dep = one("Deployment", "cipherfleet-coordinator")
svc = one("Service", "cipherfleet-coordinator")
tls = one("Secret", "cipherfleet-coordinator-tls")
if tls:
    need(tls.get("type") == "kubernetes.io/tls", "Secret cipherfleet-coordinator-tls: not of type kubernetes.io/tls")
if dep:
    pod = dep["spec"]["template"]
    need(dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), "Deployment: selector does not match its pods")
    # Several coordinators share the database through host leases; two or more for availability,
    # updated one at a time with the new pod up first.
    need((dep["spec"].get("replicas") or 1) >= 2, "Deployment: fewer than two coordinator replicas")
    strategy = dep["spec"].get("strategy", {})
    need(strategy.get("type") == "RollingUpdate"
         and strategy.get("rollingUpdate", {}).get("maxUnavailable") in (0, "0", "0%"),
         f"Deployment: not a RollingUpdate with maxUnavailable 0: {strategy}")
    c = check_pod(pod, "Deployment/cipherfleet-coordinator", "cipherfleet-coordinator")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    need(ports == {"grpc": 7443, "http": 8080}, f"coordinator ports: {ports}")
    need(c.get("args", [None])[0] == "serve", "coordinator: does not run `serve`")
    need(arg(c, "--grpc-listen") == "0.0.0.0:7443", "coordinator: --grpc-listen is not 0.0.0.0:7443")
    need(arg(c, "--http-listen") == "0.0.0.0:8080", "coordinator: --http-listen is not 0.0.0.0:8080 (probes could not reach it)")
    need(arg(c, "--tls-cert") and arg(c, "--tls-key"), "coordinator: gRPC without TLS")
    env = {e["name"] for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
    need({"DATABASE_URL", "CIPHERFLEET_AGENT_TOKEN", "CIPHERFLEET_ADMIN_TOKEN"} <= env, f"coordinator: secrets in env: {sorted(env)}")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    tls_dir = (arg(c, "--tls-cert") or "").rsplit("/", 1)[0]
    need(vols.get(mounts.get(tls_dir), {}).get("secret", {}).get("secretName") == "cipherfleet-coordinator-tls",
         f"coordinator: {tls_dir} is not the TLS Secret")
    for probe in ("readinessProbe", "livenessProbe"):
        get = c.get(probe, {}).get("httpGet", {})
        need(get.get("path") == "/healthz" and get.get("port") in ("http", 8080), f"coordinator: {probe} is not GET /healthz on http")
if svc and dep:
    labels = dep["spec"]["template"]["metadata"]["labels"]
    need(svc["spec"]["selector"].items() <= labels.items(), "Service: selector does not match the coordinator's pods")
    sports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    need(sports == {"grpc": (7443, "grpc"), "http": (8080, "http")}, f"Service ports: {sports}")

# The agent DaemonSet.
ds = one("DaemonSet", "cipherfleet-agent")
if ds:
    pod = ds["spec"]["template"]
    need(ds["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), "DaemonSet: selector does not match its pods")
    c = check_pod(pod, "DaemonSet/cipherfleet-agent", "cipherfleet-agent")
    need(c.get("args", [None])[0] == "run", "agent: does not run `run`")
    terms = pod["spec"].get("affinity", {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    arches = {v for t in terms for e in t.get("matchExpressions", []) if e["key"] == "kubernetes.io/arch" for v in e["values"]}
    arches |= {pod["spec"].get("nodeSelector", {}).get("kubernetes.io/arch")} - {None}
    need(arches == {"amd64", "arm64"}, f"agent: placed on arches {sorted(arches)}, want amd64 and arm64")
    need(pod["spec"].get("tolerations"), "agent: no tolerations (tainted nodes would go unmeasured)")
    url = arg(c, "--coordinator") or ""
    need(url.startswith("https://"), f"agent: --coordinator {url!r} is not https://")
    if svc:
        want = f"https://{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc:7443"
        need(url == want, f"agent: --coordinator {url!r}, the Service is {want}")
    need(arg(c, "--name") == "$(NODE_NAME)", "agent: --name is not the node's name (a new pod would be a new host)")
    env = {e["name"]: e for e in c.get("env", [])}
    need(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName", "agent: NODE_NAME is not spec.nodeName")
    need("secretKeyRef" in env.get("CIPHERFLEET_TOKEN", {}).get("valueFrom", {}), "agent: the enrollment token is not from a Secret")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    state = vols.get(mounts.get(arg(c, "--state-dir") or ""), {})
    need(state.get("hostPath", {}).get("path"), "agent: --state-dir is not kept on the node (the host credential would be lost with the pod)")
    for m in c.get("volumeMounts", []):
        if "hostPath" in vols.get(m["name"], {}) and m["mountPath"] != arg(c, "--state-dir"):
            need(m.get("readOnly") is True, f"agent: the node's {vols[m['name']]['hostPath']['path']} is mounted writable")
    ca = (arg(c, "--ca-cert") or "").rsplit("/", 1)[0]
    need(vols.get(mounts.get(ca), {}).get("secret", {}).get("secretName") == "cipherfleet-agent", "agent: --ca-cert is not from the agent Secret")

for p in problems:
    print(f"check-k8s: {p}")
kinds = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_kind.items()))
print(f"check-k8s: {len(docs)} manifests ({kinds}): {'ok' if not problems else f'{len(problems)} problems'}")
sys.exit(1 if problems else 0)
