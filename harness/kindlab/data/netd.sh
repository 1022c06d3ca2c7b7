#!/bin/bash
# powercut-netd: the pod network of powercut's kind clusters (in place of kindnetd, which the
# Go module proxy does not serve). On every node, from the Node objects:
# - writes a ptp + host-local CNI config for this node's spec.podCIDR (state on /run, so a
#   power cycle starts with a clean address pool, as on kind);
# - routes every other node's podCIDR via that node's InternalIP (all nodes share kind's
#   Docker network, so one hop);
# - masquerades pod traffic leaving the pod network.
set -u
# PID 1 of its container: without a handler, SIGTERM would be ignored and a node's shutdown
# would wait for the kill timeout.
trap 'exit 0' TERM INT
SA=/var/run/secrets/kubernetes.io/serviceaccount
API="https://${CONTROL_PLANE_ENDPOINT:-${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}}"
CONF=/etc/cni/net.d/10-powercut.conflist
log() { echo "$(date -u +%FT%TZ) $*"; }
api() {
  curl -sf --max-time 10 --cacert "$SA/ca.crt" -H "Authorization: Bearer $(cat "$SA/token")" "$API$1"
}
if ! iptables -t nat -C POSTROUTING -s "$POD_SUBNET" ! -d "$POD_SUBNET" -j MASQUERADE 2>/dev/null; then
  iptables -t nat -A POSTROUTING -s "$POD_SUBNET" ! -d "$POD_SUBNET" -j MASQUERADE
fi
log "netd on $NODE_NAME, pod network $POD_SUBNET, API $API"
while true; do
  if nodes=$(api /api/v1/nodes); then
    mine=$(jq -r --arg n "$NODE_NAME" '.items[] | select(.metadata.name == $n) | .spec.podCIDR // empty' <<<"$nodes")
    if [ -n "$mine" ]; then
      want=$(jq -cn --arg s "$mine" '{cniVersion: "0.4.0", name: "powercut", plugins: [
        {type: "ptp", ipMasq: false, mtu: 1500,
         ipam: {type: "host-local", dataDir: "/run/cni-ipam-state",
                routes: [{dst: "0.0.0.0/0"}], ranges: [[{subnet: $s}]]}},
        {type: "portmap", capabilities: {portMappings: true}}]}')
      if [ "$(cat "$CONF" 2>/dev/null)" != "$want" ]; then
        echo "$want" > "$CONF.tmp" && mv "$CONF.tmp" "$CONF"
        log "wrote $CONF for $mine"
      fi
    fi
    jq -r --arg n "$NODE_NAME" '.items[] | select(.metadata.name != $n) | select(.spec.podCIDR)
      | [.spec.podCIDR, ([.status.addresses[]? | select(.type == "InternalIP") | .address][0] // "")] | @tsv' <<<"$nodes" |
      while read -r cidr via; do
        [ -n "$via" ] || continue
        case "$(ip route show "$cidr") " in
          *" via $via "*) ;;
          *) ip route replace "$cidr" via "$via" && log "route $cidr via $via" ;;
        esac
      done
  else
    log "cannot list nodes from $API"
  fi
  sleep 3 &
  wait $!
done
