//! Doubles of nccl-tests and of Open MPI's mpirun, for machines without GPUs or MPI.
//! They print a recorded real run (tests/fixtures/nccl/h200x2-all_reduce.txt) and say
//! in their first line that they are doubles.
//!
//! A node can be slowed: a file `slow.<the node's eth0 address>` in the doubles' directory
//! holds a factor k; on that node the nccl-tests double prints its rows k times slower
//! (time x k, algbw and busbw / k, and k times its pace). The node finds its own address
//! (`pace`), so the slowness belongs to the node, not to anything flightdeck passes.
//!
//! The mpirun double does what mpirun does before the ranks run: it reaches every host of
//! its `--hostfile` over SSH with the options flightdeck gives mpirun
//! (`OMPI_MCA_plm_rsh_args`, read from its environment as mpirun reads it), and there runs
//! `pace` through its `--launch-agent` when it has one (as mpirun starts its daemon
//! through it); then it replays the recording at the pace of the slowest host, its lines
//! tagged as `--tag-output` tags them. Its arguments go to `mpirun.args` beside it. It
//! starts no ranks and uses no GPUs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Write the doubles into `dir`: `all_reduce_perf`, `mpirun`, and their helpers `pace`
/// and `replay`. `sleep` is the pace in seconds per row at factor 1.
pub fn install(dir: &Path, sleep: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/h200x2-all_reduce.txt");
    let d = dir.display();
    write_exec(
        &dir.join("pace"),
        &format!(
            "#!/bin/sh\n# DOUBLE helper: the slowness factor of the node it runs on (1 unless {d}/slow.<eth0 address> says)\n\
             a=$(ip -4 -o addr show dev eth0 2>/dev/null | awk '{{print $4}}' | cut -d/ -f1 | head -n1)\n\
             cat \"{d}/slow.${{a:-none}}\" 2>/dev/null || echo 1\n"
        ),
    );
    write_exec(
        &dir.join("replay"),
        &format!(
            "#!/bin/sh\n# DOUBLE helper: replay the recorded nccl-tests run, k = $1 times slower\n\
             awk -v k=\"$1\" -v s='{sleep}' 'BEGIN {{ print \"# DOUBLE of nccl-tests (flightdeck tests): a recorded real run replayed, slowed \" k \"x\"; fflush() }}\n\
             /^ *[0-9]+ +[0-9]+ / && NF >= 13 {{\n\
               if (k != 1) {{ $6 = sprintf(\"%.2f\", $6 * k); $7 = sprintf(\"%.2f\", $7 / k); $8 = sprintf(\"%.2f\", $8 / k);\n\
                 $10 = sprintf(\"%.2f\", $10 * k); $11 = sprintf(\"%.2f\", $11 / k); $12 = sprintf(\"%.2f\", $12 / k) }}\n\
               print; fflush(); if (s > 0) system(\"sleep \" s * k); next }}\n\
             /Avg bus bandwidth/ && k != 1 {{ $NF = sprintf(\"%.3f\", $NF / k) }}\n\
             {{ print; fflush() }}' '{fixture}'\n",
            fixture = fixture.display()
        ),
    );
    write_exec(
        &dir.join("all_reduce_perf"),
        &format!(
            "#!/bin/sh\n# DOUBLE of nccl-tests' all_reduce_perf: replays a recorded real run at this node's pace.\n\
             echo \"args: $*\" >&2\nexec '{d}/replay' \"$('{d}/pace')\"\n"
        ),
    );
    write_exec(
        &dir.join("mpirun"),
        &format!(
            "#!/bin/sh\n# DOUBLE of Open MPI's mpirun: reaches each host over SSH, replays the recorded run at the slowest host's pace.\n\
             echo \"mpirun args: $*\" >&2\n\
             printf '%s\\n' \"$*\" >> '{d}/mpirun.args'\n\
             hf=; np=; agent=; while [ $# -gt 0 ]; do case \"$1\" in --hostfile) hf=$2; shift 2;; -np) np=$2; shift 2;; --launch-agent) agent=$2; shift 2;; *) shift;; esac; done\n\
             [ -f \"$hf\" ] || {{ echo 'mpirun double: no --hostfile' >&2; exit 2; }}\n\
             worst=1\n\
             for h in $(awk '{{print $1}}' \"$hf\"); do\n\
               k=$(ssh ${{OMPI_MCA_plm_rsh_args:-}} \"$h\" \"${{agent:+$agent }}'{d}/pace'\" < /dev/null) || {{ echo \"mpirun double: ssh to $h failed\" >&2; exit 1; }}\n\
               worst=$(awk -v a=\"$worst\" -v b=\"$k\" 'BEGIN {{ print (b > a) ? b : a }}')\n\
             done\n\
             echo \"mpirun double: $np ranks on $(wc -l < \"$hf\") hosts, slowest pace $worst\" >&2\n\
             '{d}/replay' \"$worst\" | sed -u 's/^/[1,0]<stdout>:/'\n"
        ),
    );
    dir.to_path_buf()
}
