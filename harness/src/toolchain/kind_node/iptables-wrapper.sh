#!/bin/sh
# iptables-wrapper: on first use, pick the iptables backend (nft or legacy) the node uses,
# point iptables{,-save,-restore} and ip6tables{,-save,-restore} at it, then run the command.
# The node's kubelet creates the chains KUBE-IPTABLES-HINT / KUBE-KUBELET-CANARY in the mangle
# table of the backend it uses; without them, count rules like the kind node's entrypoint
# (legacy when it has at least as many rules as nft).
bb=/usr/bin/busybox
hint() { { xtables-$1-multi iptables-save -t mangle; xtables-$1-multi ip6tables-save -t mangle; } 2>/dev/null |
	$bb grep -c -E '^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)'; }
rules() { { xtables-$1-multi iptables-save; xtables-$1-multi ip6tables-save; } 2>/dev/null | $bb grep -c '^-'; }
if [ "$(hint nft)" -gt 0 ]; then mode=nft
elif [ "$(hint legacy)" -gt 0 ]; then mode=legacy
elif [ "$(rules legacy)" -ge "$(rules nft)" ]; then mode=legacy
else mode=nft
fi
for t in iptables ip6tables; do
	for s in "" -save -restore; do $bb ln -sf "xtables-$mode-multi" "/usr/sbin/$t$s"; done
done
# exec the chosen backend directly (another process may be re-linking at this moment)
exec "/usr/sbin/xtables-$mode-multi" "$($bb basename "$0")" "$@"
