#!/bin/bash
# Run by mmdebstrap inside the new root file system (chroot), after the packages are installed:
# the steps of kind's base-image Dockerfile, Debian's binary paths mapped to kind's, and image
# hygiene. Never empty /tmp here: mmdebstrap keeps its apt configuration there, and its final
# cleanup would otherwise act on the host's apt state.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# kind's Dockerfile, first RUN (after clean-install)
find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
rm -f /lib/systemd/system/multi-user.target.wants/*
rm -f /etc/systemd/system/*.wants/*
rm -f /lib/systemd/system/local-fs.target.wants/*
rm -f /lib/systemd/system/sockets.target.wants/*udev*
rm -f /lib/systemd/system/sockets.target.wants/*initctl*
rm -f /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >> /etc/systemd/journald.conf
# systemd-sysv provides /sbin/init already
[ -e /sbin/init ] || ln -s /lib/systemd/systemd /sbin/init

# Debian's binaries where kind's units and configuration expect them: containerd, ctr and the
# shim in /usr/local/bin, runc in /usr/local/sbin, the CNI plugins in /opt/cni/bin (a real
# directory, so that other plugins can be dropped there)
for b in containerd ctr containerd-shim-runc-v2; do ln -sf "/usr/bin/$b" "/usr/local/bin/$b"; done
ln -sf "$(command -v runc)" /usr/local/sbin/runc
mkdir -p /opt/cni/bin
for p in host-local loopback ptp portmap bridge; do
  [ -e "/usr/lib/cni/$p" ] && ln -sf "/usr/lib/cni/$p" "/opt/cni/bin/$p"
done

# kind's Dockerfile, second and third RUN
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests

# kind's final stage: the base OCI spec of CRI containers
ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json
chmod 0644 /etc/containerd/cri-base.json
# containerd accepts kind's configuration
containerd --config /etc/containerd/config.toml config dump > /dev/null

# hygiene: kind's entrypoint makes the machine id; each node generates its iSCSI name; the
# container runtime mounts its own resolv.conf and hostname over these
: > /etc/machine-id
if [ -f /etc/iscsi/initiatorname.iscsi ]; then
  printf '## generated on first iscsid start\nGenerateName=yes\n' > /etc/iscsi/initiatorname.iscsi
fi
for f in /etc/resolv.conf /etc/hostname; do rm -f "$f"; : > "$f"; chmod 0644 "$f"; done
rm -f /var/lib/dbus/machine-id
rm -rf /var/log/* /var/tmp/* /var/cache/debconf/*-old
rm -f /tmp/kind-post.sh /var/lib/dpkg/diversions-old
# the loader cache without the build's eatmydata
ldconfig
# no mirror in the image: apt inside a node needs one configured first
printf '# add a Debian mirror here (or a .sources file in sources.list.d) before using apt\n' > /etc/apt/sources.list
rm -f /etc/apt/sources.list.d/*
sed -i '/Acquire::Check-Valid-Until\|Acquire::Check-Date/d' /etc/apt/apt.conf.d/99mmdebstrap 2>/dev/null || true
