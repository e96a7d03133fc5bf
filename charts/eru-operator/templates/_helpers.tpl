{{/* The chart's name. */}}
{{- define "eru-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name if it contains the chart's, else release-chart. */}}
{{- define "eru-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "eru-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eru-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels: the chart's, then commonLabels (a key the chart sets stays the chart's). */}}
{{- define "eru-operator.labels" -}}
{{ include "eru-operator.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- include "eru-operator.commonLabels" . }}
{{- end }}

{{/* commonLabels but those the chart sets itself, as YAML lines (each after a newline). */}}
{{- define "eru-operator.commonLabels" -}}
{{- $common := omit (.Values.commonLabels | default dict) "app.kubernetes.io/name" "app.kubernetes.io/instance" "helm.sh/chart" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" }}
{{- with $common }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The image: [registry/]repository, then @digest if set, else :tag (empty: the chart's appVersion). */}}
{{- define "eru-operator.image" -}}
{{- $image := .Values.image }}
{{- $repository := $image.repository }}
{{- with $image.registry }}{{ $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}{{ end }}
{{- if $image.digest }}
{{- printf "%s@%s" $repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $repository ($image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* The pod's pull Secrets: global.imagePullSecrets, then imagePullSecrets; each a name or {name: …}. */}}
{{- define "eru-operator.imagePullSecrets" -}}
{{- $global := (.Values.global | default dict).imagePullSecrets | default list }}
{{- $names := list }}
{{- range concat $global (.Values.imagePullSecrets | default list) }}
{{- $name := "" }}
{{- if kindIs "string" . }}{{ $name = . }}{{ else if kindIs "map" . }}{{ $name = .name | default "" }}{{ end }}
{{- if and $name (not (has $name $names)) }}{{ $names = append $names $name }}{{ end }}
{{- end }}
{{- range $names }}
- name: {{ . }}
{{- end }}
{{- end }}

{{/* The API's port name, its scheme: https (meshes then do not take it for plain HTTP), or http
with http.auth none and no TLS Secret. */}}
{{- define "eru-operator.portName" -}}
{{- include "eru-operator.scheme" . | lower }}
{{- end }}

{{- define "eru-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "eru-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The leader Lease's name (RBAC scopes get/update to it). */}}
{{- define "eru-operator.leaseName" -}}
{{- default (include "eru-operator.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* "true" when the journal is PostgreSQL (shared by replicas), else "" (SQLite on a volume). */}}
{{- define "eru-operator.postgres" -}}
{{- if .Values.journal.postgres.existingSecret }}true{{ end }}
{{- end }}

{{/* Refuses value combinations the operator cannot run. */}}
{{- define "eru-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled: true (only the Lease holder may act)" }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (not (include "eru-operator.postgres" .)) }}
{{- fail "replicas > 1 needs a shared PostgreSQL journal: set journal.postgres.existingSecret (a SQLite file takes one operator process)" }}
{{- end }}
{{- end }}

{{/* Prefix of the journal volume, the blackouts ConfigMap and the cluster-scoped roles every
user binds (metrics-reader, history-reader, view, edit): "eru" for the release eru-operator, so
they keep the names deploy/ has always used (eru-journal, eru-blackouts, eru-view,
eru-metrics-reader); "<release>-eru" for another release name (prod: prod-eru-view), so that a
second release names its cluster-scoped objects apart. The other cluster-scoped objects (the
operator's ClusterRoles and bindings, FlowSchemas, priority levels) carry the full name. */}}
{{- define "eru-operator.prefix" -}}
{{- include "eru-operator.fullname" . | trimSuffix "-operator" }}
{{- end }}

{{/* The API's scheme: HTTPS with auth (self-signed) or a TLS Secret. */}}
{{- define "eru-operator.scheme" -}}
{{- if or (eq .Values.http.auth "kubernetes") .Values.http.tls.secretName -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end }}

{{/* --controllers: the Eru's, and the optional ones that are on. */}}
{{- define "eru-operator.controllers" -}}
eru{{ if .Values.controllers.podset.enabled }},podset{{ end }}{{ if .Values.controllers.memcached.enabled }},memcached{{ end }}
{{- end }}

{{/* The Eru controller's namespaced rules: in its ClusterRole, or with watchNamespace in a Role
of that namespace (templates/rbac.yaml). */}}
{{- define "eru-operator.namespacedRules" -}}
# Watch Erus; create/patch/delete the Erus auto-created from workload annotations.
- apiGroups: ["mtsre.meitu.com"]
  resources: ["erus"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["mtsre.meitu.com"]
  resources: ["erus/status"]
  verbs: ["get", "patch"]
# Eru targets: watched and restarted (the restart patch); no create, no delete.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["get", "list", "watch", "patch"]
# Blocking-pod health gates.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# PodDisruptionBudget health gates.
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
