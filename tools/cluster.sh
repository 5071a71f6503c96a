#!/bin/sh
# An emulated cluster on one machine (docs/cluster.md): N network namespaces
# as hosts, each with its own hostname and one veth link to a bridge that lives
# in a namespace of its own (the switch), every link shaped to a rate with tbf
# in both directions.  Nothing touches the machine's own network: the switch
# namespace has no route out, so the hosts reach only each other.
#
#   tools/cluster.sh up N [--rate R] [--name NAME] [--owner PID]
#   tools/cluster.sh down [--name NAME]
#   tools/cluster.sh status [--name NAME]
#   tools/cluster.sh reap        (takes down every cluster whose owner died)
#
# R is a tc rate with a unit: 100mbit, 1gbit, 10gbit (default: unshaped).
# NAME (letters and digits, at most 8; default c<PID of the caller>) keeps
# clusters of concurrent runs apart: namespaces are adjoin-NAME-sw and
# adjoin-NAME-h0 .. h<N-1>.  `up` prints ADJ_CLUSTER=NAME.  OWNER (default:
# the caller) is the process whose death lets `reap` -- run by every `up` --
# take the cluster down, so a run killed before its trap leaves nothing for
# long.  `up` takes down what it made if any step fails.  Needs root (or
# CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 and util-linux.
set -eu

state_root=${ADJ_CLUSTER_STATE:-/run/adjoin-cluster}
max_hosts=64

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}

usage() {
  sed -n '2,/^set -eu/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2
  exit 2
}

# A rate in bits per second from tc's notation (integer with bit, kbit, mbit,
# gbit); refuses anything else by name.
rate_bits() {
  case $1 in
    *[!0-9a-z]* | '') die "--rate '$1' is not a rate such as 100mbit, 1gbit or 10gbit" ;;
  esac
  number=${1%%[a-z]*}
  unit=${1#"$number"}
  if [ -z "$number" ] || [ "${number#0}" != "$number" ]; then
    die "--rate '$1' must start with a positive whole number (e.g. 1gbit)"
  fi
  case $unit in
    bit) scale=1 ;;
    kbit) scale=1000 ;;
    mbit) scale=1000000 ;;
    gbit) scale=1000000000 ;;
    *) die "--rate '$1' has unit '$unit'; use bit, kbit, mbit or gbit" ;;
  esac
  [ ${#number} -le 6 ] || die "--rate '$1' is out of range"
  echo $((number * scale))
}

# tbf on one device, egress: a burst of 2 ms of traffic (at least 256 KB, so a
# GSO packet of the veth always fits) and a queue of 100 ms, deep enough that
# TCP is paced by the bucket and not by drops.
shape() {
  burst=$(($4 / 8 / 500))
  [ "$burst" -ge 262144 ] || burst=262144
  ip -n "$1" link set "$2" txqueuelen 10000
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst "$burst" latency 100ms
}

owner_alive() {
  [ -f "$1/owner" ] && kill -0 "$(cat "$1/owner")" 2>/dev/null
}

# Ends the processes still running in a namespace (ranks of a killed run):
# each by its id, those this machine reports inside that namespace only.
end_processes() {
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  [ -z "$pids" ] && return 0
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in $(ip netns pids "$1" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
}

cluster_namespaces() {
  ip netns list | sed -n "s/^\(adjoin-$1-[a-z0-9]*\)\( .*\)\{0,1\}$/\1/p"
}

# Its own variable for the name: `up` reaps dead owners' clusters before it
# makes its own, and must keep the name it was given.
take_down() {
  down_name=$1
  for ns in $(cluster_namespaces "$down_name"); do
    end_processes "$ns"
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "${state_root:?}/$down_name"
}

reap() {
  [ -d "$state_root" ] || return 0
  for dir in "$state_root"/*; do
    [ -d "$dir" ] || continue
    owner_alive "$dir" || take_down "$(basename "$dir")"
  done
}

# The stand-in for ssh that MPI launchers call as `ssh [options] HOST COMMAND`:
# it runs COMMAND, which arrives as one string as ssh would pass it, inside
# the host's network namespace and in a fresh UTS namespace named after it.
write_ssh() {
  cat >"$1" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\${1##*@}
shift
case \$host in
  10.77.0.*) index=\$((\${host##*.} - 1)) ;;
  h[0-9]*) index=\${host#h} ;;
  *) echo "cluster $2: no host '\$host' (hosts: 10.77.0.1-$3, h0-h$(($3 - 1)))" >&2; exit 255 ;;
esac
[ -e /run/netns/adjoin-$2-h\$index ] || { echo "cluster $2: no host h\$index" >&2; exit 255; }
exec ip netns exec "adjoin-$2-h\$index" unshare --uts sh -c 'hostname "\$0" && eval "exec \$1"' "h\$index" "\$*"
EOF
  chmod +x "$1"
}

up() {
  hosts=$1 name=$2 rate=$3 owner=$4
  bits=0
  [ -n "$rate" ] && bits=$(rate_bits "$rate")
  [ -n "$(cluster_namespaces "$name")" ] || [ -d "$state_root/$name" ] &&
    die "a cluster named '$name' is already up; take it down first (tools/cluster.sh down --name $name)"
  dir=$state_root/$name
  mkdir -p "$dir"
  echo "$owner" >"$dir/owner"
  # Whatever fails from here on takes down what was made.
  trap 'take_down "$name"' EXIT
  trap 'exit 130' INT TERM HUP
  sw=adjoin-$name-sw
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" addr add 10.77.0.254/24 dev br0
  ip -n "$sw" link set br0 up
  i=0
  while [ "$i" -lt "$hosts" ]; do
    ns=adjoin-$name-h$i
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [ "$bits" -gt 0 ]; then
      shape "$ns" eth0 "$rate" "$bits"
      shape "$sw" "p$i" "$rate" "$bits"
    fi
    echo "h$i 10.77.0.$((i + 1)) $ns" >>"$dir/hosts"
    i=$((i + 1))
  done
  echo "${rate:-unshaped}" >"$dir/rate"
  write_ssh "$dir/ssh" "$name" "$hosts"
  trap - EXIT INT TERM HUP
  echo "ADJ_CLUSTER=$name"
}

[ $# -ge 1 ] || usage
command=$1
shift
hosts=
if [ "$command" = up ]; then
  [ $# -ge 1 ] || die "up needs a host count: tools/cluster.sh up N [--rate R]"
  hosts=$1
  shift
  case $hosts in *[!0-9]* | '' | 0*) die "host count '$hosts' is not a whole number from 1 to $max_hosts" ;; esac
  [ "$hosts" -le "$max_hosts" ] || die "host count $hosts is above $max_hosts"
fi
name=${ADJ_CLUSTER:-c$PPID} rate='' owner=$PPID
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "option '$1' needs a value"
  case $1 in
    --rate) rate=$2 ;;
    --name) name=$2 ;;
    --owner) owner=$2 ;;
    *) die "unknown option '$1'" ;;
  esac
  shift 2
done
case $name in
  *[!a-z0-9]* | '') die "cluster name '$name' must be lower-case letters and digits" ;;
esac
[ ${#name} -le 8 ] || die "cluster name '$name' is longer than 8 characters"
case $owner in *[!0-9]* | '') die "owner '$owner' is not a process id" ;; esac
[ "$(id -u)" -eq 0 ] || die "needs root for network namespaces (running as uid $(id -u))"

case $command in
  up)
    reap
    up "$hosts" "$name" "$rate" "$owner"
    ;;
  down) take_down "$name" ;;
  reap) reap ;;
  status)
    [ -f "$state_root/$name/hosts" ] || die "no cluster named '$name' is up"
    echo "cluster $name: rate $(cat "$state_root/$name/rate"), owner $(cat "$state_root/$name/owner")"
    cat "$state_root/$name/hosts"
    ;;
  *) usage ;;
esac
