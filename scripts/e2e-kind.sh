#!/usr/bin/env bash
# End to end on a real Kubernetes cluster: kind, KEDA, RabbitMQ, the asya operator and the
# quickstart pipeline installed with Helm. Envelopes are sent with `asya send`; every actor is
# watched scaling 0 -> N while they run and back to 0 after its cooldown, and every envelope
# must reach happy-end, taking the same routes as in `asya dev`.
#
# For a machine with a Docker engine, kind, kubectl and helm, and asya's CLI installed with
# its rabbitmq and render extras (`.venv/bin/asya` after `pip install -e '.[rabbitmq,render]'`,
# or '.[dev]'). It is not
# part of the test suite, which runs where there is no Docker engine: there the operator is
# tested end to end on a stand-in cluster (tests/operator). On GitHub,
# .github/workflows/e2e.yml runs it on every push, on a hosted runner. Run it by hand:
#
#   scripts/e2e-kind.sh            # about 10 minutes on a laptop; --help for the settings
set -euo pipefail

usage() {
    printf '%s\n' \
        "usage: scripts/e2e-kind.sh [--help]" \
        "" \
        "Creates a kind cluster, builds and loads asya's images (sidecar, operator, runtime) and" \
        "the quickstart's actor image, installs KEDA, RabbitMQ, the asya-operator chart and the" \
        "quickstart (asya render + the asya-pipeline chart), sends examples/quickstart/inputs.jsonl" \
        "with asya send, and checks that each actor scales 0 -> N -> 0 and that every envelope" \
        "reaches happy-end. Exits 0 on success, 1 on a failed check, 2 on a missing tool." \
        "" \
        "Needs: docker (with a running engine), kind, kubectl, helm, and asya's CLI." \
        "" \
        "Settings (environment variables):" \
        "  E2E_CLUSTER       kind cluster name (default: asya-e2e); reused if it exists" \
        "  KEEP_CLUSTER=1    keep the cluster at the end (default: delete it if this run made it)" \
        "  E2E_NAMESPACE     namespace of the quickstart's actors and queues (default: quickstart)" \
        "  E2E_TAG           tag of the images built here (default: e2e)" \
        "  E2E_COOLDOWN_S    each actor's KEDA cooldown, seconds (default: 30)" \
        "  E2E_MAX_REPLICAS  each actor's most replicas (default: 3)" \
        "  E2E_TIMEOUT_S     longest wait for each phase, seconds (default: 600)" \
        "  KEDA_VERSION      kedacore/keda Helm chart version (default: 2.19.0)" \
        "  KIND_NODE_IMAGE   kind node image (default: kind's own)" \
        "  ASYA              asya CLI (default: .venv/bin/asya, else asya on PATH)" \
        "  PYTHON            Python with asya and PyYAML (default: the one beside \$ASYA)" \
        "  AMQP_LOCAL_PORT   local port forwarded to RabbitMQ's AMQP port (default: 35672)"
}

case "${1:-}" in
    -h | --help)
        usage
        exit 0
        ;;
    "") ;;
    *)
        printf 'e2e-kind: unknown argument %s\n' "$1" >&2
        usage >&2
        exit 2
        ;;
esac

# Builtins only up to the tool check, so that a bare machine gets the list of what is missing.
case ${BASH_SOURCE[0]} in
    */*) SCRIPT_DIR=${BASH_SOURCE[0]%/*} ;;
    *) SCRIPT_DIR=. ;;
esac
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
CLUSTER=${E2E_CLUSTER:-asya-e2e}
NS=${E2E_NAMESPACE:-quickstart}
TAG=${E2E_TAG:-e2e}
COOLDOWN_S=${E2E_COOLDOWN_S:-30}
MAX_REPLICAS=${E2E_MAX_REPLICAS:-3}
TIMEOUT_S=${E2E_TIMEOUT_S:-600}
KEDA_VERSION=${KEDA_VERSION:-2.19.0}
AMQP_LOCAL_PORT=${AMQP_LOCAL_PORT:-35672}
if [[ -z "${ASYA:-}" ]]; then
    if [[ -x "$REPO/.venv/bin/asya" ]]; then ASYA="$REPO/.venv/bin/asya"; else ASYA=asya; fi
fi
PYTHON=${PYTHON:-}

SIDECAR_IMAGE="asya.local/asya-sidecar:$TAG"
OPERATOR_IMAGE="asya.local/asya-operator:$TAG"
RUNTIME_IMAGE="asya.local/asya-runtime:$TAG"
QUICKSTART_IMAGE="asya.local/asya-quickstart:$TAG"
APP=examples.quickstart
INPUTS=examples/quickstart/inputs.jsonl
# The broker as the pods see it (the Secret) and as this machine sees it (a port-forward).
BROKER_USER=asya
BROKER_PASSWORD=asya-e2e
BROKER_HOST=rabbitmq.rabbitmq.svc.cluster.local
CLUSTER_AMQP_URL="amqp://$BROKER_USER:$BROKER_PASSWORD@$BROKER_HOST:5672/%2F"
CLUSTER_MANAGEMENT_URL="http://$BROKER_USER:$BROKER_PASSWORD@$BROKER_HOST:15672/"
LOCAL_AMQP_URL="amqp://$BROKER_USER:$BROKER_PASSWORD@127.0.0.1:$AMQP_LOCAL_PORT/%2F"

say() { printf '\n== %s\n' "$*" >&2; }
fail() {
    printf 'e2e-kind: FAILED: %s\n' "$*" >&2
    exit 1
}

check_tools() {
    local missing=() tool
    for tool in docker kind kubectl helm "$ASYA"; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    if ((${#missing[@]})); then
        printf 'e2e-kind: missing: %s\n' "${missing[*]}" >&2
        printf 'e2e-kind: this script needs docker (with a running engine), kind, kubectl, helm' >&2
        printf ' and asya (pip install -e ".[dev]", or set ASYA=path/to/asya)\n' >&2
        exit 2
    fi
    PYTHON=${PYTHON:-$(dirname "$(command -v "$ASYA")")/python}
    if ! "$PYTHON" -c 'import asya, yaml' >/dev/null 2>&1; then
        printf 'e2e-kind: %s cannot import asya and yaml: set PYTHON to the one asya is in\n' \
            "$PYTHON" >&2
        exit 2
    fi
    if ! docker info >/dev/null 2>&1; then
        printf 'e2e-kind: docker is installed but its engine does not answer (docker info)\n' >&2
        exit 2
    fi
}

# --- cleanup --------------------------------------------------------------------------------

created_cluster=0
has_cluster=0
since=""
port_forward_pid=""
tmp=""

diagnose() {
    say "diagnostics"
    kubectl get pods -A -o wide || true
    kubectl get asyncactors,deployments,scaledobjects -n "$NS" || true
    kubectl describe asyncactors -n "$NS" | tail -n 60 || true
    kubectl logs -n asya-system -l app.kubernetes.io/name=asya-operator --tail=80 || true
}

cleanup() {
    local status=$?
    if ((status != 0 && has_cluster == 1)); then diagnose; fi
    if [[ -n "$port_forward_pid" ]]; then kill "$port_forward_pid" 2>/dev/null || true; fi
    if [[ -n "$tmp" ]]; then rm -rf "$tmp"; fi
    if [[ $created_cluster == 1 && "${KEEP_CLUSTER:-}" != 1 ]]; then
        say "deleting kind cluster $CLUSTER (KEEP_CLUSTER=1 keeps it)"
        kind delete cluster --name "$CLUSTER" || true
    elif [[ $created_cluster == 1 ]]; then
        say "kept kind cluster $CLUSTER: kind delete cluster --name $CLUSTER"
    fi
    exit "$status"
}

# --- steps ----------------------------------------------------------------------------------

expected_finals() {
    say "the quickstart in memory (asya dev): what the cluster must produce"
    "$ASYA" dev "$APP" --input "$INPUTS" --quiet --output "$tmp/expected.jsonl" >/dev/null
    printf 'expected final envelopes: %s\n' "$(wc -l <"$tmp/expected.jsonl")" >&2
}

create_cluster() {
    if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
        say "reusing kind cluster $CLUSTER"
    else
        say "creating kind cluster $CLUSTER"
        local args=(create cluster --name "$CLUSTER" --wait 180s)
        if [[ -n "${KIND_NODE_IMAGE:-}" ]]; then args+=(--image "$KIND_NODE_IMAGE"); fi
        created_cluster=1
        kind "${args[@]}"
    fi
    kubectl config use-context "kind-$CLUSTER" >/dev/null
    has_cluster=1
}

build_images() {
    say "building images (context: the repository root)"
    docker build -f images/sidecar/Dockerfile -t "$SIDECAR_IMAGE" .
    docker build -f images/operator/Dockerfile -t "$OPERATOR_IMAGE" .
    docker build -f images/runtime/Dockerfile -t "$RUNTIME_IMAGE" .
    docker build -f examples/quickstart/Dockerfile --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" \
        -t "$QUICKSTART_IMAGE" .
    say "loading images into $CLUSTER"
    kind load docker-image --name "$CLUSTER" \
        "$SIDECAR_IMAGE" "$OPERATOR_IMAGE" "$RUNTIME_IMAGE" "$QUICKSTART_IMAGE"
}

install_keda() {
    say "installing KEDA $KEDA_VERSION"
    helm repo add kedacore https://kedacore.github.io/charts --force-update >/dev/null
    helm upgrade --install keda kedacore/keda --version "$KEDA_VERSION" \
        --namespace keda --create-namespace --wait --timeout "${TIMEOUT_S}s"
}

install_rabbitmq() {
    say "installing RabbitMQ (management plugin)"
    kubectl apply -f scripts/e2e/rabbitmq.yaml
    kubectl rollout status deployment/rabbitmq -n rabbitmq --timeout "${TIMEOUT_S}s"
}

create_broker_secret() {
    say "broker Secret asya-broker in $NS"
    kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f -
    kubectl create secret generic asya-broker -n "$NS" \
        --from-literal=amqp-url="$CLUSTER_AMQP_URL" \
        --from-literal=management-url="$CLUSTER_MANAGEMENT_URL" \
        --dry-run=client -o yaml | kubectl apply -f -
}

install_operator() {
    say "installing the asya-operator chart"
    helm upgrade --install asya-operator charts/asya-operator \
        --namespace asya-system --create-namespace --wait --timeout "${TIMEOUT_S}s" \
        --set "image.repository=${OPERATOR_IMAGE%:*},image.tag=$TAG" \
        --set "sidecar.image.repository=${SIDECAR_IMAGE%:*},sidecar.image.tag=$TAG"
}

install_quickstart() {
    say "installing the quickstart (asya render + the asya-pipeline chart)"
    # The module name, not the folder: handlers become examples.quickstart.text:normalize, ...,
    # which is where the quickstart image puts the package.
    "$ASYA" render "$APP" --image "$QUICKSTART_IMAGE" -o "$tmp/values.yaml"
    # Under every actor (none of the quickstart's sets these): a short cooldown, a small
    # ceiling for a laptop-sized cluster, and frequent polling.
    helm upgrade --install quickstart charts/asya-pipeline --namespace "$NS" \
        -f "$tmp/values.yaml" \
        --set "actorDefaults.scaling.cooldownPeriod=$COOLDOWN_S,actorDefaults.scaling.pollingInterval=5" \
        --set "actorDefaults.scaling.maxReplicas=$MAX_REPLICAS"
}

actor_names() {
    kubectl get asyncactors -n "$NS" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}

# "name replicas ready", one line per AsyncActor (the Deployment's counts, from its status).
actor_replicas() {
    kubectl get asyncactors -n "$NS" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.replicas}{" "}{.status.readyReplicas}{"\n"}{end}'
}

wait_for_idle_actors() {
    say "waiting for the AsyncActors: Ready at 0 replicas, end actors up"
    local expected deadline=$((SECONDS + TIMEOUT_S))
    expected=$("$PYTHON" -c 'import sys, yaml; print(len(yaml.safe_load(open(sys.argv[1]))["actors"]))' \
        "$tmp/values.yaml")
    until (($(actor_names | grep -c . || true) >= expected)); do
        ((SECONDS < deadline)) || fail "expected $expected AsyncActors in $NS, have $(actor_names | wc -l)"
        sleep 3
    done
    kubectl wait asyncactors --all -n "$NS" --for=condition=Ready --timeout "${TIMEOUT_S}s"
    until kubectl get deployment happy-end error-end -n "$NS" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "the end actors' Deployments did not appear in $NS"
        sleep 3
    done
    kubectl rollout status deployment/happy-end deployment/error-end -n "$NS" \
        --timeout "${TIMEOUT_S}s"
    local busy
    busy=$(actor_replicas | awk '$2 != "" && $2 != 0')
    [[ -z "$busy" ]] || fail "actors not at 0 replicas before any envelope: $busy"
    actor_replicas >&2
}

port_forward() {
    say "port-forwarding RabbitMQ's AMQP port to 127.0.0.1:$AMQP_LOCAL_PORT"
    kubectl port-forward -n rabbitmq svc/rabbitmq "$AMQP_LOCAL_PORT:5672" \
        >"$tmp/port-forward.log" 2>&1 &
    port_forward_pid=$!
    local deadline=$((SECONDS + 60))
    until (exec 3<>"/dev/tcp/127.0.0.1/$AMQP_LOCAL_PORT") 2>/dev/null; do
        ((SECONDS < deadline)) || fail "port-forward did not open: $(cat "$tmp/port-forward.log")"
        sleep 1
    done
}

send_envelopes() {
    say "sending $(grep -c . "$INPUTS") envelopes with asya send"
    : >"$tmp/sent.jsonl"
    # Results are read from a little before now: a reused cluster keeps older runs' records.
    since=$("$PYTHON" -c 'import datetime as d
print((d.datetime.now(d.timezone.utc) - d.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ"))')
    local line
    while IFS= read -r line || [[ -n "$line" ]]; do
        [[ -n "$line" ]] || continue
        "$ASYA" send --broker "$LOCAL_AMQP_URL" --namespace "$NS" --app "$APP" \
            --payload "$line" >>"$tmp/sent.jsonl"
    done <"$INPUTS"
}

declare -A peak=()

# Sample each actor's replicas, print the picture when it changes, remember each one's peak.
sample_replicas() {
    local picture name replicas
    picture=$(actor_replicas)
    if [[ "$picture" != "${last_picture:-}" ]]; then
        # actor=replicas/ready for each AsyncActor, then the Deployments as Kubernetes has them.
        printf '[%4ds] %s\n' "$SECONDS" \
            "$(awk '{printf "%s=%s/%s ", $1, ($2 == "" ? 0 : $2), ($3 == "" ? 0 : $3)}' <<<"$picture")" >&2
        kubectl get deployments -n "$NS" --no-headers 2>/dev/null | sed 's/^/        /' >&2 || true
        last_picture=$picture
    fi
    while read -r name replicas _; do
        [[ -n "$name" ]] || continue
        replicas=${replicas:-0}
        if ((replicas > ${peak[$name]:-0})); then peak[$name]=$replicas; fi
    done <<<"$picture"
}

wait_for_results() {
    say "waiting for every envelope at happy-end, watching replicas"
    local expected got failed deadline=$((SECONDS + TIMEOUT_S))
    expected=$(wc -l <"$tmp/expected.jsonl")
    while :; do
        sample_replicas
        "$ASYA" results --broker "$LOCAL_AMQP_URL" --namespace "$NS" --since "$since" \
            >"$tmp/results.jsonl"
        "$ASYA" results --failed --broker "$LOCAL_AMQP_URL" --namespace "$NS" --since "$since" \
            >"$tmp/failures.jsonl"
        got=$(wc -l <"$tmp/results.jsonl")
        failed=$(wc -l <"$tmp/failures.jsonl")
        if ((failed > 0)); then
            head -c 4000 "$tmp/failures.jsonl" >&2
            fail "$failed envelope(s) reached error-end"
        fi
        ((got >= expected)) && break
        ((SECONDS < deadline)) || fail "$got of $expected final envelopes after ${TIMEOUT_S}s"
        sleep 5
    done
    printf 'final envelopes at happy-end: %s of %s\n' "$got" "$expected" >&2
}

compare_with_asya_dev() {
    # Every envelope sent is accounted for (its own final, or its fan-out children's), and the
    # routes taken are the ones `asya dev` took: split for long texts, review for unsure scores.
    "$PYTHON" - "$tmp/sent.jsonl" "$tmp/results.jsonl" \
        "$tmp/expected.jsonl" <<'PY'
import collections
import json
import sys

sent_path, results_path, expected_path = sys.argv[1:]
sent = {json.loads(line)["id"] for line in open(sent_path) if line.strip()}
finals = [json.loads(line) for line in open(results_path) if line.strip()]
expected = [json.loads(line) for line in open(expected_path) if line.strip()]
roots = {final["id"].split("-")[0] for final in finals}
problems = []
if roots != sent:
    problems.append(f"sent without a final: {sorted(sent - roots)}; unknown: {sorted(roots - sent)}")
def routes(envelopes):
    return collections.Counter(" > ".join(e["route"]["prev"]) for e in envelopes)
if routes(finals) != routes(expected):
    problems.append(f"routes differ: cluster {dict(routes(finals))}, asya dev {dict(routes(expected))}")
for problem in problems:
    print(f"e2e-kind: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}

wait_for_scale_to_zero() {
    say "waiting for every actor back at 0 replicas (cooldown ${COOLDOWN_S}s)"
    local deadline=$((SECONDS + TIMEOUT_S))
    while :; do
        sample_replicas
        [[ -z "$(actor_replicas | awk '$2 != "" && $2 != 0')" ]] && break
        ((SECONDS < deadline)) || fail "actors still running after ${TIMEOUT_S}s: $(actor_replicas)"
        sleep 5
    done
}

summary() {
    say "summary"
    local name never=()
    printf '%-20s %s\n' actor "peak replicas" >&2
    for name in $(actor_names); do
        printf '%-20s %s\n' "$name" "${peak[$name]:-0}" >&2
        ((${peak[$name]:-0} > 0)) || never+=("$name")
    done
    ((${#never[@]} == 0)) || fail "never scaled above 0: ${never[*]}"
    printf 'e2e-kind: OK: %s envelopes sent, every one at happy-end, every actor 0 -> N -> 0\n' \
        "$(wc -l <"$tmp/sent.jsonl")" >&2
}

main() {
    check_tools
    cd "$REPO"
    tmp=$(mktemp -d)
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    expected_finals
    create_cluster
    build_images
    install_keda
    install_rabbitmq
    create_broker_secret
    install_operator
    install_quickstart
    wait_for_idle_actors
    port_forward
    send_envelopes
    wait_for_results
    compare_with_asya_dev
    wait_for_scale_to_zero
    summary
}

main
