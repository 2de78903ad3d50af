# python_kernel_steps.sh — the steps check_python_kernel.sh and check_python_kernel_torch2.sh
# share, sourced by both (after example_steps.sh, whose fail and skip they use) once they set:
# cpparity (the binary), source_dir, python (the interpreter that runs the kernel scripts of
# examples/python-kernel) and work (a scratch folder; every *.out in it is shown on failure).
#   exported NAME ARGS...                 `cpparity export ARGS... -o $work/NAME.h5`
#   dumped SCRIPT EXPORT DUMP [ARGS...]   examples/python-kernel/SCRIPT's kernel dump of EXPORT
#                                         (ARGS: --wrong NAME), its output in $work/kernel.out
#   judged EXPECTED_EXIT EXPORT DUMP      `cpparity judge EXPORT DUMP`, its console in
#                                         $work/judge.out; fail unless it exits EXPECTED_EXIT
#   passes SCRIPT NAME                    SCRIPT's dump of $work/NAME.h5 judged PASS (exit 0)
#   planted SCRIPT NAME WRONG VERDICT     SCRIPT --wrong WRONG on $work/NAME.h5 judged FAIL
#                                         (exit 1), the console saying VERDICT and naming a
#                                         failing element (layer, batch row, position, head)
exported() {
    local name=$1
    shift
    rm -f "$work/$name.h5"
    "$cpparity" export "$@" -o "$work/$name.h5" > "$work/export.out" 2>&1 ||
        fail "cpparity export $* -o $name.h5"
}
dumped() {
    local script=$1 export=$2 dump=$3
    shift 3
    rm -f "$dump"
    served "$source_dir/examples/python-kernel/$script" "$work/kernel.out" "$export" -o "$dump" \
        "$@" || fail "$script $* on $(basename "$export")"
}
judged() {
    local expected=$1 export=$2 dump=$3 code=0
    rm -f "$work/judged.h5"
    "$cpparity" judge "$export" "$dump" --out "$work/judged.h5" > "$work/judge.out" 2>&1 ||
        code=$?
    [ "$code" = "$expected" ] ||
        fail "judge of $(basename "$dump") against $(basename "$export"): exit $code," \
            "expected $expected"
}
passes() {
    local script=$1 name=$2
    dumped "$script" "$work/$name.h5" "$work/dump.h5"
    judged 0 "$work/$name.h5" "$work/dump.h5"
    echo "PASS $script on $name: $(grep -m1 '^# [0-9]* passed' "$work/judge.out" | cut -c3-)"
}
planted() {
    local script=$1 name=$2 wrong=$3 verdict=$4
    dumped "$script" "$work/$name.h5" "$work/wrong.h5" --wrong "$wrong"
    judged 1 "$work/$name.h5" "$work/wrong.h5"
    grep -qF -- "$verdict" "$work/judge.out" ||
        fail "$script --wrong $wrong: the judge does not say '$verdict'"
    local located='FAIL attention/layers\.[0-9]+\.[a-z_.]+ batch row [0-9]+ '
    located+='(position [0-9]+ head [0-9]+|head [0-9]+ position [0-9]+)'
    grep -qE -- "$located" "$work/judge.out" ||
        fail "$script --wrong $wrong: no failing element named by layer, row, position and head"
    echo "FAIL as expected: $script --wrong $wrong: $verdict; first:" \
        "$(grep -m1 -oE -- "$located" "$work/judge.out" | cut -c6-)"
}
