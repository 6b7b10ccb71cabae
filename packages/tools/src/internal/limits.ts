/**
 * Resource limits of one shell call: rlimits set by `prlimit` (util-linux) just before the
 * command starts, and a cgroup per call where rx may create one.
 *
 * - RLIMIT_DATA (private writable memory: heap and anonymous mappings), RLIMIT_CPU,
 *   RLIMIT_FSIZE and RLIMIT_CORE (0) bind every process, root included. RLIMIT_DATA rather
 *   than RLIMIT_AS: an address-space limit breaks programs that reserve large ranges without
 *   using them (V8's WebAssembly memory needs about 10 GiB of address space, JVMs reserve their
 *   heap up front).
 * - RLIMIT_NPROC counts the tasks (processes and threads) of the caller's real user. The kernel
 *   ignores it for root. Inside bubblewrap's new user namespace it counts only the sandbox's
 *   tasks; elsewhere it counts all of the user's, so there it is set to what the user has now
 *   plus the call's allowance.
 * - A cgroup per call, where one can be created (a writable cgroup v1 `pids` hierarchy, or
 *   cgroup v2 below rx's own group): its `pids.max` bounds the call's tasks whoever runs it, and
 *   its member list finds every process of the call, even one that left with `setsid` and
 *   cleared its environment.
 */
import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from "node:fs"
import * as NodePath from "node:path"

/** What one call may use. */
export interface Limits {
  readonly processes: number
  readonly memoryBytes: number
  readonly cpuSeconds: number
  readonly fileBytes: number
}

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** rx's current hard limit named as in `/proc/self/limits` ("Max processes"); Infinity if none. */
const hardLimit = (name: string): number => {
  const line = read("/proc/self/limits")?.split("\n").find((l) => l.startsWith(name))
  const hard = line?.slice(name.length).trim().split(/\s+/)[1]
  return hard === undefined || hard === "unlimited" || !/^\d+$/.test(hard) ? Infinity : Number(hard)
}

/** A limit no larger than rx's own hard limit, which an unprivileged process cannot raise. */
const capped = (value: number, name: string): number => Math.min(value, hardLimit(name))

/** The limits as they can be set: none above rx's own hard limits. */
export const effective = (limits: Limits): Limits => ({
  processes: capped(limits.processes, "Max processes"),
  memoryBytes: capped(limits.memoryBytes, "Max data size"),
  cpuSeconds: capped(limits.cpuSeconds, "Max cpu time"),
  fileBytes: capped(limits.fileBytes, "Max file size")
})

/**
 * `prlimit` options for (effective) limits; `nproc` is the RLIMIT_NPROC value to set, or
 * undefined to leave it alone. Each sets the soft and the hard limit.
 */
export const prlimitArgs = (limits: Limits, nproc: number | undefined): ReadonlyArray<string> => [
  `--data=${limits.memoryBytes}`,
  `--cpu=${limits.cpuSeconds}`,
  `--fsize=${limits.fileBytes}`,
  "--core=0",
  ...(nproc === undefined ? [] : [`--nproc=${capped(nproc, "Max processes")}`])
]

/** Tasks (processes and threads) whose real user is `uid`, as RLIMIT_NPROC counts them. */
export const userTasks = (uid: number): number => {
  let count = 0
  let pids: Array<string>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name))
  } catch {
    return 0
  }
  for (const pid of pids) {
    const status = read(`/proc/${pid}/status`)
    if (status === undefined) continue
    const real = /^Uid:\s+(\d+)/m.exec(status)?.[1]
    if (real === undefined || Number(real) !== uid) continue
    count += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? "1")
  }
  return count
}

/** The group path of a `/proc/self/cgroup` line split at ":" (the path may hold ":"). */
const parts = (fields: ReadonlyArray<string>): string => fields.slice(2).join(":")

/** Where rx can create a cgroup per call. */
export interface CgroupBase {
  readonly dir: string
  /** True when a new group has `pids.max`. */
  readonly pids: boolean
}

/** Undo the octal escapes of `/proc/self/mountinfo` (`\040` for a space). */
const unescape = (field: string): string => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))

/** The folder of rx's own group in a hierarchy mounted with `fstype` (and `option`, for v1). */
const ownGroupDir = (fstype: string, option: string | undefined, groupPath: string): string | undefined => {
  for (const line of (read("/proc/self/mountinfo") ?? "").split("\n")) {
    const [before, after] = line.split(" - ")
    if (before === undefined || after === undefined) continue
    const fields = before.split(" ")
    const [type, , superOptions] = after.split(" ")
    if (type !== fstype) continue
    if (option !== undefined && !(superOptions ?? "").split(",").includes(option)) continue
    const root = unescape(fields[3] ?? "")
    const mountPoint = unescape(fields[4] ?? "")
    if (root === "/") return NodePath.join(mountPoint, groupPath)
    if (groupPath === root || groupPath.startsWith(`${root}/`)) return NodePath.join(mountPoint, groupPath.slice(root.length))
  }
  return undefined
}

/** Whether a child group can be made in `dir` and a process moved into it. */
const usable = (dir: string): boolean => {
  const probe = NodePath.join(dir, `rx-probe-${process.pid}-${randomBytes(4).toString("hex")}`)
  try {
    mkdirSync(probe)
  } catch {
    return false
  }
  try {
    const moved = spawnSync("/bin/sh", ["-c", "echo $$ > \"$0\"", NodePath.join(probe, "cgroup.procs")], {
      stdio: "ignore",
      timeout: 5_000
    })
    return moved.status === 0
  } finally {
    remove(probe)
  }
}

/** Remove a group; false if it still has members. */
export const remove = (dir: string): boolean => {
  try {
    rmdirSync(dir)
    return true
  } catch (error) {
    return typeof error === "object" && error !== null && "code" in error && error.code === "ENOENT"
  }
}

/**
 * A place for per-call groups: a cgroup v1 `pids` hierarchy first (it limits tasks), else
 * cgroup v2 below rx's own group. Checked once: a group is made and a process moved into it.
 */
export const discover = (): CgroupBase | undefined => {
  const lines = (read("/proc/self/cgroup") ?? "").split("\n")
  const v1 = lines.map((line) => line.split(":")).find((parts) => (parts[1] ?? "").split(",").includes("pids"))
  if (v1 !== undefined) {
    const dir = ownGroupDir("cgroup", "pids", parts(v1))
    if (dir !== undefined && usable(dir)) return { dir, pids: true }
  }
  const v2 = lines.map((line) => line.split(":")).find((parts) => parts[0] === "0" && parts[1] === "")
  if (v2 !== undefined) {
    const dir = ownGroupDir("cgroup2", undefined, parts(v2))
    if (dir !== undefined && usable(dir)) {
      const controllers = read(NodePath.join(dir, "cgroup.subtree_control")) ?? ""
      return { dir, pids: controllers.split(/\s+/).includes("pids") }
    }
  }
  return undefined
}

let discovered: { readonly base: CgroupBase | undefined } | undefined

/** `discover`, checked once per process (it starts a process to probe), then remembered. */
export const discoverOnce = (): CgroupBase | undefined => (discovered ??= { base: discover() }).base

/**
 * The name of a group rx makes: what it is for (`shell`, `mcp`), the marker of its processes,
 * and the pid of the rx that owns it, by which `sweep` tells a leftover from a group in use.
 */
export const groupName = (kind: string, marker: string): string => `rx-${kind}-${marker}-${process.pid}`

const named = /^rx-(?:shell|mcp)-[0-9a-f]+(?:-(\d+))?$/

/** Whether a process with this pid is alive (one of another user counts). */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return typeof error === "object" && error !== null && "code" in error && error.code === "EPERM"
  }
}

/** A group without an owner's pid (an older rx) is left alone this long after it was made. */
const unownedAgeMs = 10 * 60_000

/**
 * Remove the empty groups rx made whose owner is gone (an rx that was killed, or could not
 * remove one in time); a group that still has processes is never removed (the kernel refuses).
 * How many were removed.
 */
export const sweep = (base: CgroupBase): number => {
  let entries: Array<string>
  try {
    entries = readdirSync(base.dir)
  } catch {
    return 0
  }
  let removed = 0
  for (const name of entries) {
    const match = named.exec(name)
    if (match === null) continue
    const owner = match[1] === undefined ? undefined : Number(match[1])
    const dir = NodePath.join(base.dir, name)
    if (owner !== undefined && (owner === process.pid || alive(owner))) continue
    if (owner === undefined) {
      const made = (() => {
        try {
          return statSync(dir).ctimeMs
        } catch {
          return Date.now()
        }
      })()
      if (Date.now() - made < unownedAgeMs) continue
    }
    if (members(dir).length === 0 && remove(dir)) removed++
  }
  return removed
}

let swept = false

/** `sweep`, once per process. */
export const sweepOnce = (base: CgroupBase): void => {
  if (swept) return
  swept = true
  sweep(base)
}

/** A call's group: its folder, and whether it bounds the call's tasks. */
export interface Group {
  readonly dir: string
  readonly limitsTasks: boolean
}

/** Make the group of one call, with `pids.max` when the hierarchy has it. */
export const create = (base: CgroupBase, name: string, maxTasks: number): Group | undefined => {
  const dir = NodePath.join(base.dir, name)
  try {
    mkdirSync(dir)
  } catch {
    return undefined
  }
  let limitsTasks = false
  const pidsMax = NodePath.join(dir, "pids.max")
  if (base.pids && existsSync(pidsMax)) {
    try {
      writeFileSync(pidsMax, String(maxTasks))
      limitsTasks = true
    } catch {
      limitsTasks = false
    }
  }
  return { dir, limitsTasks }
}

/** The processes in a group. */
export const members = (dir: string): ReadonlyArray<number> =>
  (read(NodePath.join(dir, "cgroup.procs")) ?? "").split("\n").filter((line) => /^\d+$/.test(line)).map(Number)

/**
 * The argv that moves itself into the group, then runs `file args`: the shell writes its own
 * pid before `exec`, so nothing the command starts is ever outside the group. If it cannot
 * join, the command does not run.
 */
export const joinArgs = (dir: string, file: string, args: ReadonlyArray<string>): ReadonlyArray<string> => [
  "-c",
  "echo $$ > \"$0\" || { echo 'rx: the process could not enter its cgroup' >&2; exit 126; }; exec \"$@\"",
  NodePath.join(dir, "cgroup.procs"),
  file,
  ...args
]
