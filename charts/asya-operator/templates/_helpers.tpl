{{/* The name of the operator's objects: the release's, suffixed unless it says asya-operator. */}}
{{- define "asya-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "asya-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "asya-operator.labels" -}}
{{ include "asya-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* repository:tag, the tag defaulting to the chart's appVersion. The defaults of
     values.yaml name where the release workflow will publish asya's images; until it has, an
     install that keeps one fails here, saying what to set (`key`) and what to build
     (`dockerfile`). Drop the check in the release that first publishes them. */}}
{{- define "asya-operator.image" -}}
{{- $unpublished := list "ghcr.io/asya-sh/asya-operator" "ghcr.io/asya-sh/asya-sidecar" -}}
{{- if has .repository $unpublished -}}
{{- fail (printf "%s.repository: no image is published at %s yet: build %s (images/README.md), push it to a registry your nodes pull from, and set %s.repository (and %s.tag)" .key .repository .dockerfile .key .key) -}}
{{- end -}}
{{- printf "%s:%s" .repository (default $.appVersion .tag) -}}
{{- end -}}

{{/* The operator's ServiceAccount, as the subject of its bindings. */}}
{{- define "asya-operator.subjects" -}}
- kind: ServiceAccount
  name: {{ include "asya-operator.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* Grants on cluster-scoped kinds, and what kopf lists cluster-wide whatever it watches. */}}
{{- define "asya-operator.clusterRules" -}}
# Node labels and tolerations of an actor's or a member's flavor; a flavor that appears or
# changes starts an admission pass (a pool's flavors are looked up by it).
- apiGroups: ["asya.sh"]
  resources: ["resourceflavors"]
  verbs: ["get", "list", "watch"]
# The quota actors' replicas and gang instances are admitted by: a change starts a pass.
- apiGroups: ["asya.sh"]
  resources: ["resourcepools", "cohorts"]
  verbs: ["list", "watch"]
# A pool's and a cohort's usage, borrowed and lent quota, written after each pass.
- apiGroups: ["asya.sh"]
  resources: ["resourcepools/status", "cohorts/status"]
  verbs: ["patch"]
# kopf discovers the resources it serves, and namespaces (a pool's namespaceSelector
# matches a namespace's labels, as does its asya.sh/default-pool label; kopf lists
# namespaces to find those it serves). The operator watches namespaces for that label to
# change: cluster-wide even with watchNamespace set, namespaces being cluster-scoped.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
# Each admission pass lists the Nodes (labels, Ready, cordoned, allocatable), only to name a
# flavor whose nodes advertise no accelerator in the statuses of what waits there; without
# this the report is left unsaid, admission is the same.
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list"]
{{- end -}}

{{/* Events on the actors and groups: admissions, preemptions, evictions; and kopf's own. */}}
{{- define "asya-operator.eventRules" -}}
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/* Grants on namespaced kinds, in the namespaces the operator watches. */}}
{{- define "asya-operator.namespacedRules" -}}
# The actors: watched, their finalizer added and removed, their status written.
- apiGroups: ["asya.sh"]
  resources: ["asyncactors"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["asya.sh"]
  resources: ["asyncactors/status"]
  verbs: ["patch"]
- apiGroups: ["asya.sh"]
  resources: ["asyncactors/finalizers"]
  verbs: ["update"]
# The gangs: watched, their finalizer added and removed, their status written.
- apiGroups: ["asya.sh"]
  resources: ["actorgroups"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["asya.sh"]
  resources: ["actorgroups/status"]
  verbs: ["patch"]
- apiGroups: ["asya.sh"]
  resources: ["actorgroups/finalizers"]
  verbs: ["update"]
# Each actor's Deployment (server-side apply) and its status.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Each running gang instance: a StatefulSet per member (server-side apply; deleted when the
# instance loses its quota) and a headless Service; their status is its readiness.
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "create", "patch", "delete"]
# A gang instance's PodGroup for the gang scheduler its group names (Kubernetes 1.37's,
# Volcano's, KAI's; made and deleted with the instance; its status says why the scheduler
# cannot place the instance whole). A kind the cluster does not serve is left alone.
- apiGroups: ["scheduling.k8s.io", "scheduling.volcano.sh", "scheduling.run.ai"]
  resources: ["podgroups"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# With Kueue admitting (config.admission: kueue), Kueue's decisions: read back into the
# actors' and groups' statuses.
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["get", "list", "watch"]
# Each actor's (and scaling group's) ScaledObject and TriggerAuthentication.
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects", "triggerauthentications"]
  verbs: ["create", "patch", "delete"]
# The broker Secret: its AMQP URL to declare and delete the actor's queues; watched so an
# actor whose Secret is deleted, or loses a key, is Degraded naming it (and recovers when it
# is back). kopf watches all Secrets in scope (--namespace narrows it) and reacts only to
# those an AsyncActor names, found in memory.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
{{- if .Values.config.brokerAdminSecret }}
# config.brokerAdminSecret: the operator makes each namespace's broker Secret (asya-broker),
# rotates its passwords on request, and removes it with the namespace's last actor
# (docs/tenancy.md).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create", "patch", "delete"]
{{- end }}
{{ include "asya-operator.eventRules" . }}
{{- end -}}

{{- /* The namespaces watched, as a list: watchNamespace may be one name or a list; empty or
       unset is every namespace (an empty list). */ -}}
{{- define "asya-operator.watched" -}}
{{- $watch := .Values.watchNamespace | default list -}}
{{- if kindIs "string" $watch -}}
{{- $watch = list $watch -}}
{{- end -}}
{{- toJson (uniq $watch) -}}
{{- end -}}
