{{/* The image reference: repository@digest when a digest is given, else repository:tag
(tag defaults to the chart's appVersion). */}}
{{- define "powercut.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Pod-level fields every pod of the chart shares: pull secrets and security context. */}}
{{- define "powercut.podCommon" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Scheduling fields of a pod from a dict with nodeSelector, tolerations, affinity and
priorityClassName. */}}
{{- define "powercut.scheduling" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "powercut.labels" -}}
app.kubernetes.io/name: powercut
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "powercut.storeClaim" -}}
{{ .Values.store.existingClaim | default (printf "%s-store" .Release.Name) }}
{{- end -}}

{{/*
A target with the defaults under it, checked: returns it as YAML (fromYaml it).
Every error names the target (by index) and the field, with what is allowed.
*/}}
{{- define "powercut.target" -}}
{{- $root := index . 0 -}}{{- $i := index . 1 -}}{{- $raw := index . 2 -}}
{{- $t := mergeOverwrite (deepCopy $root.Values.defaults) (deepCopy $raw) -}}
{{- $where := printf "values targets[%d]" $i -}}
{{- if not $t.name -}}{{- fail (printf "%s: name is missing (1-40 lowercase letters, digits, '-')" $where) -}}{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$" (toString $t.name)) -}}
{{- fail (printf "%s.name %q: must be 1-40 lowercase letters, digits or '-', starting and ending with a letter or digit" $where (toString $t.name)) -}}
{{- end -}}
{{- if not (has $t.mode (list "features" "longevity")) -}}
{{- fail (printf "%s.mode %q: must be features or longevity" $where (toString $t.mode)) -}}
{{- end -}}
{{- if and $t.inventory.configMap $t.inventory.secret -}}
{{- fail (printf "%s.inventory: give configMap or secret, not both" $where) -}}
{{- end -}}
{{- if not (or $t.inventory.configMap $t.inventory.secret) -}}
{{- fail (printf "%s.inventory: configMap or secret is required (the inventory YAML's ConfigMap or Secret)" $where) -}}
{{- end -}}
{{- if not $t.kubeconfigSecret -}}
{{- fail (printf "%s.kubeconfigSecret: required (a Secret with key kubeconfig: the target cluster's kubeconfig)" $where) -}}
{{- end -}}
{{- $longest := printf "%s-%s%s" $root.Release.Name $t.name (ternary "-recover" "" (and $t.recover $t.recover.enabled | default false)) -}}
{{- if gt (len $longest) 52 -}}
{{- fail (printf "%s.name %q: the CronJob name %q is %d characters; Kubernetes allows 52 (shorten the release name or the target's name)" $where (toString $t.name) $longest (len $longest)) -}}
{{- end -}}
{{- with $t.targetToken.projected -}}
{{- if .audience -}}
{{- $path := .path -}}{{- $dir := dir .path -}}
{{- range list "/etc/powercut" "/store" "/tmp" "/var/lib/powercut" -}}
{{- if or (eq $dir .) (hasPrefix (printf "%s/" .) $dir) -}}
{{- fail (printf "%s.targetToken.projected.path %q: its directory would be mounted in %s, where the chart mounts other files; valid: a directory of its own, e.g. /var/run/secrets/powercut/target/token" $where $path .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (eq $t.mode "features") (not $t.features.builtin) (not $t.features.configMaps) -}}
{{- fail (printf "%s.features: builtin is false and no configMaps are given: nothing to run" $where) -}}
{{- end -}}
{{- toYaml $t -}}
{{- end -}}

{{/* env, envFrom, volumeMounts and securityContext of a runner's containers. */}}
{{- define "powercut.runnerEnv" -}}
{{- $root := index . 0 -}}{{- $t := index . 1 -}}
env:
  - name: POWERCUT_STATE_DIR
    value: /var/lib/powercut/state
  - name: POWERCUT_TARGET
    value: {{ $t.name }}
{{- with $t.credentialsSecret }}
envFrom:
  - secretRef: {name: {{ . }}}
{{- end }}
volumeMounts:
  - {name: state, mountPath: /var/lib/powercut}
  - {name: store, mountPath: /store}
  - {name: inventory, mountPath: /etc/powercut/inventory, readOnly: true}
  - {name: target, mountPath: /etc/powercut/target, readOnly: true}
{{- range $t.features.configMaps }}
  - {name: features-{{ . }}, mountPath: /etc/powercut/features/{{ . }}, readOnly: true}
{{- end }}
  - {name: tmp, mountPath: /tmp}
{{- if $t.targetToken.projected.audience }}
  - {name: target-token, mountPath: {{ dir $t.targetToken.projected.path }}, readOnly: true}
{{- end }}
{{- with $root.Values.containerSecurityContext }}
securityContext: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The projected volume of a target's rotating token (targetToken.projected.audience set). */}}
{{- define "powercut.targetTokenVolume" -}}
{{- with .targetToken.projected -}}
- name: target-token
  projected:
    defaultMode: 0440
    sources:
      - serviceAccountToken:
          audience: {{ .audience | quote }}
          expirationSeconds: {{ .expirationSeconds }}
          path: {{ base .path }}
{{- end -}}
{{- end -}}
