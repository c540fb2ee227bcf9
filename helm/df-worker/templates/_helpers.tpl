{{/* Names, labels and the checks shared by the df-worker chart's templates. */}}

{{- define "df-worker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "df-worker.fullname" -}}
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

{{- define "df-worker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "df-worker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "df-worker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "df-worker.labels" -}}
helm.sh/chart: {{ include "df-worker.chart" . }}
{{ include "df-worker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "df-worker.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding the API key: the user's, or the one this chart creates from apiKey.value. */}}
{{- define "df-worker.apiKeySecretName" -}}
{{- if .Values.apiKey.existingSecret }}
{{- .Values.apiKey.existingSecret }}
{{- else }}
{{- printf "%s-api-key" (include "df-worker.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The ConfigMap mounted at /app/handlers, or "" when the image's own handlers are used. */}}
{{- define "df-worker.handlersConfigMapName" -}}
{{- if .Values.handlers.configMap.existing }}
{{- .Values.handlers.configMap.existing }}
{{- else if .Values.handlers.configMap.create }}
{{- printf "%s-handlers" (include "df-worker.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* "true" in clustered mode (the replicas share budget and work through Redis), "" in standalone mode. */}}
{{- define "df-worker.clustered" -}}
{{- if .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* The most replicas the Deployment runs: replicaCount, or autoscaling.maxReplicas while an autoscaler owns the count. */}}
{{- define "df-worker.maxReplicas" -}}
{{- if include "df-worker.autoscaling" . }}{{ int .Values.autoscaling.maxReplicas }}{{ else }}{{ int .Values.replicaCount }}{{ end }}
{{- end }}

{{/* "true" when the chart creates a PodDisruptionBudget: podDisruptionBudget.enabled, where auto means more than one replica (at most). */}}
{{- define "df-worker.podDisruptionBudget" -}}
{{- $enabled := toString .Values.podDisruptionBudget.enabled }}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") (gt (int (include "df-worker.maxReplicas" .)) 1)) }}true{{ end }}
{{- end }}

{{/* "true" when an autoscaler (the HPA or KEDA's ScaledObject) owns the replica count. */}}
{{- define "df-worker.autoscaling" -}}
{{- if or .Values.autoscaling.hpa.enabled .Values.autoscaling.keda.enabled }}true{{ end }}
{{- end }}

{{- define "df-worker.stateClaimName" -}}
{{- default (printf "%s-state" (include "df-worker.fullname" .) | trunc 63 | trimSuffix "-") .Values.persistence.existingClaim }}
{{- end }}

{{/*
Refuses values that would deploy a worker that cannot work, with a message saying what to change. Called from
deployment.yaml, so `helm install`, `helm template` and `helm lint` all stop on them.
*/}}
{{- define "df-worker.validate" -}}
{{- $clustered := include "df-worker.clustered" . }}
{{- if and (gt (int .Values.replicaCount) 1) (not $clustered) }}
{{- fail (printf "replicaCount is %d, but redis.existingSecret is empty: without Redis, several workers on one key would each spend the key's whole budget (the service then answers 429). Set redis.existingSecret to the name of a Secret holding the Redis URL under redis.existingSecretKey (clustered mode, see CLUSTERING.md), or set replicaCount to 1 (or 0)." (int .Values.replicaCount)) }}
{{- end }}
{{- if and .Values.redis.tls.certKey (not .Values.redis.tls.keyKey) }}
{{- fail "redis.tls.certKey is set but redis.tls.keyKey is empty: a client certificate needs its key; name the Secret's entry holding it, or empty both." }}
{{- end }}
{{- if and $clustered (not .Values.redis.existingSecretKey) }}
{{- fail "redis.existingSecret is set but redis.existingSecretKey is empty: name the entry of that Secret that holds the Redis URL." }}
{{- end }}
{{- if and $clustered .Values.persistence.enabled }}
{{- fail "persistence.enabled is true, but redis.existingSecret is set: in clustered mode the journal and the month's budget live in Redis and each pod keeps only scratch state in an emptyDir, so no volume is needed (and one ReadWriteOnce claim cannot serve several pods). Set persistence.enabled to false." }}
{{- end }}
{{- range $name := list "hpa" "keda" }}
{{- if and (index $.Values.autoscaling $name).enabled (not $clustered) }}
{{- fail (printf "autoscaling.%s.enabled is true, but redis.existingSecret is empty: standalone mode runs one worker per key (more would each spend the key's whole budget), so there is nothing to scale. Set redis.existingSecret (clustered mode, see CLUSTERING.md), or set autoscaling.%s.enabled to false." $name $name) }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.hpa.enabled .Values.autoscaling.keda.enabled }}
{{- fail "autoscaling.hpa.enabled and autoscaling.keda.enabled are both true: KEDA manages an HPA of its own, and two autoscalers on one Deployment fight. Keep one." }}
{{- end }}
{{- if and (include "df-worker.autoscaling" .) (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail (printf "autoscaling.minReplicas (%d) is above autoscaling.maxReplicas (%d): lower the first or raise the second." (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- end }}
{{- if not (has (toString .Values.podDisruptionBudget.enabled) (list "auto" "true" "false")) }}
{{- fail (printf "podDisruptionBudget.enabled is %v: use auto (a PDB with more than one replica), true or false." .Values.podDisruptionBudget.enabled) }}
{{- end }}
{{- if and (not .Values.apiKey.existingSecret) (not .Values.apiKey.value) }}
{{- fail "No API key: set apiKey.existingSecret to the name of a Secret holding the key under apiKey.secretKey (preferred), or apiKey.value to have the chart create one." }}
{{- end }}
{{- $apiUrlFromEnv := false }}
{{- range .Values.extraEnv }}
{{- if eq .name "DF_API_URL" }}{{ $apiUrlFromEnv = true }}{{ end }}
{{- end }}
{{- if and (not (dig "api" "url" "" .Values.config)) (not $apiUrlFromEnv) }}
{{- fail "No service URL: set config.api.url to the Data Factory service's base URL, e.g. https://api.example.com." }}
{{- end }}
{{- $graceMs := 30000 }}
{{- if hasKey .Values.config "shutdownGraceMs" }}
{{- $graceMs = int .Values.config.shutdownGraceMs }}
{{- end }}
{{- $neededMs := add $graceMs (max 5000 (div $graceMs 2)) }}
{{- if le (mul (int .Values.terminationGracePeriodSeconds) 1000) $neededMs }}
{{- fail (printf "terminationGracePeriodSeconds is %d s, but the worker needs more than %d ms after SIGTERM: config.shutdownGraceMs (%d ms) for running handlers plus max(5 s, half of it) to flush reports. Raise terminationGracePeriodSeconds above %d or lower config.shutdownGraceMs." (int .Values.terminationGracePeriodSeconds) $neededMs $graceMs (div $neededMs 1000)) }}
{{- end }}
{{- if and (eq .Values.wake.mode "token") (not .Values.wake.tokenSecret.name) }}
{{- fail "wake.mode is token but wake.tokenSecret.name is empty: name the Secret holding the wake token under wake.tokenSecret.key." }}
{{- end }}
{{- if and .Values.handlers.configMap.create .Values.handlers.configMap.existing }}
{{- fail "handlers.configMap.create and handlers.configMap.existing are both set: keep one." }}
{{- end }}
{{- if and .Values.handlers.configMap.create (not .Values.handlers.configMap.files) }}
{{- fail "handlers.configMap.create is true but handlers.configMap.files is empty: add handler modules (file name -> source), e.g. with --set-file." }}
{{- end }}
{{- end }}
