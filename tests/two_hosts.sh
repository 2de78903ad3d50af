#!/usr/bin/env bash
# A job over two hosts that share no files: `mpirun --hostfile` starts rank 0 on host A and
# rank 1 on host B, two network namespaces joined by a virtual Ethernet link, where B sees
# none of A's job directory (a tmpfs is mounted over it in B's mount namespace). The suite is
# only on A. The job must pass, rank 0 reading the suite and sending it to rank 1, and the
# results file must be written on A alone: this is what `mpirun` over nodes without a shared
# file system, or `srun` with node-local directories, does.
#
# usage: two_hosts.sh MPIRUN CPPARITY SUITE WORK_DIR [ROOT_FLAG]
# Exits 77 (ctest: skipped, with the reason) where network namespaces cannot be made (not root,
# no CAP_NET_ADMIN, no `ip`, no `unshare`).
set -u
mpirun=$1 cpparity=$2 suite=$3 work=$4 root_flag=${5:-}

skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip > /dev/null || skip "no 'ip' command (iproute2) to make network namespaces"
command -v unshare > /dev/null || skip "no 'unshare' command (util-linux)"

tag=$$
host_a=cpp-a-$tag host_b=cpp-b-$tag
address_a=10.231.0.1 address_b=10.231.0.2
job=$work/two-hosts-$tag   # host A's job directory; on host B it is an empty tmpfs
cleanup() {
    ip netns del "$host_a" 2> /dev/null
    ip netns del "$host_b" 2> /dev/null
    rm -rf "$job"
}
trap cleanup EXIT

ip netns add "$host_a" 2> /dev/null || skip "cannot make a network namespace (needs root or CAP_NET_ADMIN)"
ip netns add "$host_b" || skip "cannot make a second network namespace"
ip link add "veth-a-$tag" type veth peer name "veth-b-$tag" 2> /dev/null ||
    skip "cannot make a virtual Ethernet pair (no veth support)"
ip link set "veth-a-$tag" netns "$host_a" && ip link set "veth-b-$tag" netns "$host_b" || exit 1
ip -n "$host_a" addr add "$address_a/24" dev "veth-a-$tag" &&
    ip -n "$host_b" addr add "$address_b/24" dev "veth-b-$tag" &&
    ip -n "$host_a" link set lo up && ip -n "$host_b" link set lo up &&
    ip -n "$host_a" link set "veth-a-$tag" up && ip -n "$host_b" link set "veth-b-$tag" up || exit 1

mkdir -p "$job" || exit 1
cp "$suite" "$job/suite.yaml" || exit 1
printf '%s slots=1\n%s slots=1\n' "$address_a" "$address_b" > "$job/hostfile"

# The remote shell mpirun uses to start its daemon on host B, as ssh would: the daemon runs in
# B's network namespace and in a mount namespace where the job directory is an empty tmpfs.
cat > "$job/enter-host" << EOF
#!/usr/bin/env bash
host=\$1; shift
[ "\$host" = "$address_b" ] || { echo "enter-host: unknown host \$host" >&2; exit 255; }
touch "$work/entered-$tag" # a daemon was started on host B
exec ip netns exec "$host_b" unshare --mount --propagation private -- \\
    bash -c 'mount -t tmpfs none "\$0" || exit 255; eval "\$1"' "$job" "\$*"
EOF
chmod +x "$job/enter-host"
cp "$job/enter-host" "$work/enter-host-$tag" # the daemon's command runs from outside the job dir
trap 'cleanup; rm -f "$work/enter-host-$tag" "$work/entered-$tag"' EXIT

# Host B really does not see the suite (else the test would prove nothing).
"$work/enter-host-$tag" "$address_b" "test ! -e '$job/suite.yaml'" && rm -f "$work/entered-$tag" ||
    { echo "host B sees the job directory: the test cannot separate the hosts"; exit 1; }

cd "$work" || exit 1
out=$(timeout 240 ip netns exec "$host_a" "$mpirun" $root_flag --hostfile "$job/hostfile" -np 2 \
    --mca plm_rsh_agent "$work/enter-host-$tag" --mca btl tcp,self \
    --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24 \
    --map-by node "$cpparity" run "$job/suite.yaml" --case full-no-padding --dtype f32 --allow-not-run \
    --out "$job/results.h5" 2>&1)
code=$?
printf '%s\n' "$out"
[ $code = 0 ] || { echo "two-host job: exit $code, expected 0"; exit 1; }
[ -e "$work/entered-$tag" ] || { echo "mpirun did not start a daemon on host B"; exit 1; }
printf '%s\n' "$out" | grep -q '^# ranks 2, comm mpi' ||
    { echo "the job did not run as two MPI ranks"; exit 1; }
printf '%s\n' "$out" | grep -q '^# OK' || { echo "the job is not OK"; exit 1; }
[ -s "$job/results.h5" ] || { echo "no results file on host A"; exit 1; }
/usr/bin/python3 - "$job/results.h5" << 'EOF' || { echo "the results file is not the two-rank run's"; exit 1; }
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    group = f["cases/full-no-padding/f32"]
    runs = [name for name in group if name.startswith("cp_2_")]
    assert runs, "no cp 2 runs in the results"
    assert f["summary"].attrs["failed"] == 0, "failed runs"
EOF
echo "two-host job passed; results written on host A only"
