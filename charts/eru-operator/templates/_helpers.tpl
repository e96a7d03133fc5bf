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

{{- define "eru-operator.labels" -}}
{{ include "eru-operator.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
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

{{/* Prefix of the journal volume and blackouts ConfigMap: "eru" for the release eru-operator,
so they keep the names deploy/ has always used (eru-journal, eru-blackouts). */}}
{{- define "eru-operator.prefix" -}}
{{- include "eru-operator.fullname" . | trimSuffix "-operator" }}
{{- end }}

{{/* The API's scheme: HTTPS with auth (self-signed) or a TLS Secret. */}}
{{- define "eru-operator.scheme" -}}
{{- if or (eq .Values.http.auth "kubernetes") .Values.http.tls.secretName -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end }}
