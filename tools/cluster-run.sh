#!/bin/sh
# Runs an MPI program on an emulated cluster made by tools/cluster.sh
# (docs/cluster.md): K ranks, PER ranks to a host on hosts h0, h1, ..., with
# TCP as the only transport between hosts.  The launcher runs in the
# cluster's switch namespace and starts each host's proxy through the
# cluster's stand-in for ssh.
#
#   tools/cluster-run.sh [--cluster NAME] [--mpiexec PATH] [--per-host PER] -n K PROGRAM [ARGS...]
#
# NAME defaults to $ADJ_CLUSTER.  PATH is the launcher of the MPI the program
# was built against (default: mpiexec.mpich, else mpiexec): MPICH's hydra and
# Open MPI's mpirun are told apart by their --version.  On more ranks than
# the machine has cores, ADJ_WAIT_POLICY defaults to yield, and
# ADJ_NUM_THREADS to the cores over the ranks (docs/cluster.md).
set -eu

state_root=${ADJ_CLUSTER_STATE:-/run/adjoin-cluster}

die() {
  echo "cluster-run.sh: $*" >&2
  exit 2
}

cluster=${ADJ_CLUSTER:-} mpiexec='' per=1 ranks=''
while [ $# -gt 0 ]; do
  case $1 in
    --cluster | --mpiexec | --per-host | -n)
      [ $# -ge 2 ] || die "option '$1' needs a value"
      case $1 in
        --cluster) cluster=$2 ;;
        --mpiexec) mpiexec=$2 ;;
        --per-host) per=$2 ;;
        -n) ranks=$2 ;;
      esac
      shift 2
      ;;
    --) shift; break ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "no program to run (usage: tools/cluster-run.sh -n K PROGRAM [ARGS...])"
[ -n "$cluster" ] || die "no cluster named: pass --cluster NAME or set ADJ_CLUSTER (tools/cluster.sh up prints it)"
dir=$state_root/$cluster
[ -f "$dir/hosts" ] || die "no cluster named '$cluster' is up (tools/cluster.sh up N --name $cluster)"
case $ranks in *[!0-9]* | '' | 0*) die "rank count -n '$ranks' is not a positive whole number" ;; esac
case $per in *[!0-9]* | '' | 0*) die "--per-host '$per' is not a positive whole number" ;; esac
available=$(wc -l <"$dir/hosts")
needed=$(((ranks + per - 1) / per))
[ "$needed" -le "$available" ] ||
  die "$ranks ranks at $per per host need $needed hosts; cluster '$cluster' has $available"
if [ -z "$mpiexec" ]; then
  mpiexec=$(command -v mpiexec.mpich || command -v mpiexec || true)
  [ -n "$mpiexec" ] || die "no MPI launcher found (mpiexec.mpich, mpiexec); pass --mpiexec PATH"
fi
command -v "$mpiexec" >/dev/null || die "launcher '$mpiexec' is not an executable"
hosts=$(head -n "$needed" "$dir/hosts" | cut -d' ' -f2 | paste -sd, -)

# The hosts share this machine's cores, which no rank can see from its
# launcher's count of ranks per host: unless told otherwise, more ranks than
# cores yield while they wait, and each rank's kernels take an equal share of
# the cores.
cores=$(nproc)
case ${ADJ_WAIT_POLICY:-auto} in
  auto) [ "$ranks" -le "$cores" ] || export ADJ_WAIT_POLICY=yield ;;
esac
if [ -z "${ADJ_NUM_THREADS:-}" ]; then
  threads=$((cores / ranks))
  export ADJ_NUM_THREADS=$((threads > 0 ? threads : 1))
fi

version=$("$mpiexec" --version 2>&1 || true)
case $version in
  *HYDRA*)
    # UCX carries MPICH's messages; held to TCP between hosts.  Ranks that
    # share a host still use MPICH's shared memory, as on a real node.
    exec ip netns exec "adjoin-$cluster-sw" "$mpiexec" -launcher ssh -launcher-exec "$dir/ssh" -iface br0 \
      -hosts "$hosts" -ppn "$per" -n "$ranks" -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0 "$@"
    ;;
  *"Open MPI"* | *OpenRTE*)
    # The ob1 messaging layer over the TCP transport (vader between ranks of
    # one host); the runtime's own traffic on the cluster's subnet.
    slots=$(echo "$hosts" | sed "s/\([^,]*\)/\1:$per/g")
    exec ip netns exec "adjoin-$cluster-sw" "$mpiexec" --allow-run-as-root --oversubscribe \
      --mca plm_rsh_agent "$dir/ssh" --host "$slots" -n "$ranks" --map-by "ppr:$per:node" \
      --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include 10.77.0.0/24 \
      --mca oob_tcp_if_include 10.77.0.0/24 "$@"
    ;;
  *) die "launcher '$mpiexec' is neither MPICH's hydra nor Open MPI's mpirun (its --version: $(echo "$version" | head -1))" ;;
esac
