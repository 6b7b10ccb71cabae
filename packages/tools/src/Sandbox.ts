/**
 * Where `shell` commands run. With bubblewrap (`bwrap`), a command sees a read-only system
 * (`/usr`, `/etc`, `/opt` and the `/bin`, `/lib*`, `/sbin` links), the workspace writable at its
 * own path but for its protected paths (read-only) and hidden paths (neither readable nor
 * writable), a private `/tmp`, fresh `/proc` and `/dev`; it has no network (a new, empty network
 * namespace), no capabilities (even when rx runs as root), a new PID namespace and session, and
 * it dies with rx (`--die-with-parent`). bwrap itself is started with the scrubbed environment,
 * so its init process (`/proc/1/environ` inside) shows nothing more. The workspace is bound from
 * a descriptor checked to be the goal's folder (`hold`), and nothing is created in it to hold
 * its guards. As root, the command runs as uid 65534 with root-only system files masked
 * (`rootOnly`).
 *
 * bwrap is only ever run from a trusted location: `/usr/bin/bwrap`, `/usr/local/bin/bwrap`,
 * `/bin/bwrap` or the configured `bwrapPath`, never looked up on PATH (a workspace's
 * `node_modules/.bin` on PATH could otherwise plant a fake `bwrap` that runs commands on the
 * host). The program and every folder above it must be owned by root (or by the user running
 * rx) and writable by no one else, and it must lie outside the workspace; `prlimit`, which sets
 * the resource limits, is checked the same way.
 *
 * Modes: `bwrap` requires it (the Layer fails when it is missing, untrusted or cannot create
 * namespaces); `auto` uses it when it works, and otherwise `shell` is not offered (the Builtins
 * Layers leave it out and `Builtins.Availability` says why and how to fix it; a registry that
 * lists it anyway gets its calls refused); `none` runs commands directly, with the same timeout, process
 * tree handling, output caps, resource limits and environment allow-list, but no isolation:
 * the command can read and write whatever rx's user can (protected and hidden paths included),
 * reach the network, and keep the capabilities of rx's user (as root it can raise its own
 * limits). Without a cgroup rx may create, a process that leaves the session with `setsid` and
 * clears its environment (`setsid env -i sh -c '...' &`) and whose parent exits cannot be
 * found and outlives the call; and if rx itself is killed with SIGKILL, a running command
 * survives it.
 */
import { Causes } from "@rx/kernel"
import { Effect, Either, Option, Schema, type Scope } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { closeSync, constants, type Dirent, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, realpathSync, renameSync, statSync } from "node:fs"
import * as NodePath from "node:path"
import type { SandboxMode } from "./Config.js"
import * as Confinement from "./Confinement.js"

/** The sandbox `shell` uses, decided once when the tools are built. */
export type Sandbox =
  | {
    readonly _tag: "Bwrap"
    readonly path: string
    /** `prlimit`, which sets the resource limits inside the sandbox. */
    readonly prlimit: string
    /** A setuid bwrap may not create a user namespace, so RLIMIT_NPROC counts all the user's tasks. */
    readonly setuid: boolean
    /** Whether this bwrap can bound a tmpfs (`--size`, bubblewrap 0.8 and later). */
    readonly tmpfsSize: boolean
  }
  | { readonly _tag: "None"; readonly prlimit: string | undefined }
  | { readonly _tag: "Unavailable"; readonly reason: string }

/** Mode `bwrap` was asked for and bubblewrap cannot be used. */
export class SandboxUnavailable extends Schema.TaggedError<SandboxUnavailable>()("@rx/tools/SandboxUnavailable", {
  reason: Schema.String
}) {
  override get message() {
    return `the bubblewrap sandbox cannot be used: ${this.reason}`
  }
}

/** What to tell a user whose shell calls are refused. */
export const installHint =
  "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`; Arch: `pacman -S bubblewrap`), or choose sandbox mode `none` (`--sandbox none`) to run commands without isolation"

/** System folders every sandbox mounts read-only when present; links among them are recreated as links. */
export const systemPaths: ReadonlyArray<string> = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]

/** Where bubblewrap is looked for, in order, when no `bwrapPath` is configured. */
export const trustedBwrap: ReadonlyArray<string> = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]

/** Where `prlimit` (util-linux) is looked for. */
export const trustedPrlimit: ReadonlyArray<string> = ["/usr/bin/prlimit", "/bin/prlimit"]


/** The owners rx trusts: root, and the user running rx. */
const trustedOwner = (uid: number): boolean => uid === 0 || uid === process.getuid?.()

/** Why a file or folder could be changed by someone rx does not trust, or undefined. */
const ownershipProblem = (path: string): string | undefined => {
  const info = statSync(path)
  if (!trustedOwner(info.uid)) return `${path} is owned by uid ${info.uid}, not by root or the user running rx`
  if ((info.mode & 0o022) !== 0) return `${path} is writable by its group or by others (mode ${(info.mode & 0o7777).toString(8)})`
  return undefined
}

/**
 * Why `path` is not a program rx may run, or undefined: it must be an absolute path to an
 * executable regular file outside the workspace; it and every folder above it (the path as given
 * and its real path) owned by root or the user running rx and writable by no one else.
 */
export const untrusted = (path: string, workspace: string): string | undefined => {
  if (!NodePath.isAbsolute(path)) return `${path} is not an absolute path`
  let real: string
  let realWorkspace = workspace
  try {
    real = realpathSync(path)
  } catch (error) {
    return Causes.codeOf(error) === "ENOENT" ? `${path} does not exist` : `${path} cannot be resolved: ${String(error)}`
  }
  try {
    realWorkspace = realpathSync(workspace)
  } catch {
    // The workspace as given.
  }
  if (Confinement.inside(realWorkspace, real) || Confinement.inside(realWorkspace, NodePath.resolve(path)) || Confinement.inside(workspace, NodePath.resolve(path))) {
    return `${path} is inside the workspace ${workspace}, which the agent can write`
  }
  try {
    const info = statSync(real)
    if (!info.isFile()) return `${path} is not a regular file`
    if ((info.mode & 0o111) === 0) return `${path} is not executable`
    const folders = new Set<string>()
    for (const start of [NodePath.dirname(NodePath.resolve(path)), NodePath.dirname(real)]) {
      for (let dir = start; ; dir = NodePath.dirname(dir)) {
        folders.add(dir)
        if (dir === NodePath.dirname(dir)) break
      }
    }
    for (const checked of [real, ...folders]) {
      const problem = ownershipProblem(checked)
      if (problem !== undefined) return problem
    }
  } catch (error) {
    return `${path} cannot be checked: ${String(error)}`
  }
  return undefined
}

/**
 * The bubblewrap to run: `configured` if given, else the first trusted location that exists.
 * Right: its path; Left: why none can be used. PATH is never searched.
 */
export const find = (workspace: string, configured?: string): Either.Either<string, string> => {
  if (configured !== undefined) {
    const problem = untrusted(configured, workspace)
    return problem === undefined ? Either.right(configured) : Either.left(`bwrapPath is not trusted: ${problem}`)
  }
  const problems: Array<string> = []
  for (const candidate of trustedBwrap) {
    const problem = untrusted(candidate, workspace)
    if (problem === undefined) return Either.right(candidate)
    if (!problem.endsWith("does not exist")) problems.push(problem)
  }
  if (problems.length > 0) return Either.left(`no trusted bwrap: ${problems.join("; ")}`)
  return Either.left(`bwrap was not found in ${trustedBwrap.join(", ")} (rx never looks it up on PATH; set bwrapPath to use another)`)
}

/** The trusted `prlimit`, if any. */
export const findPrlimit = (workspace: string): Either.Either<string, string> => {
  const problems: Array<string> = []
  for (const candidate of trustedPrlimit) {
    const problem = untrusted(candidate, workspace)
    if (problem === undefined) return Either.right(candidate)
    if (!problem.endsWith("does not exist")) problems.push(problem)
  }
  return Either.left(
    problems.length > 0
      ? `no trusted prlimit: ${problems.join("; ")}`
      : `prlimit (util-linux), which applies the resource limits, was not found in ${trustedPrlimit.join(", ")}`
  )
}

/** A path kept from the command: `read-only`, or `hidden` (neither readable nor writable). */
export interface Guard {
  readonly path: string
  readonly kind: "read-only" | "hidden"
}

/** Directory entries a search for nested guarded names looks at, at most. */
const nestedBudget = 100_000

/**
 * Entries below the top level of `workspace` named like one of `names` (case-insensitively):
 * nested repositories' and submodules' `.git`. Links are not followed, `node_modules` and the
 * matches themselves are not entered, and the search stops after `nestedBudget` entries.
 */
export const nested = (workspace: string, names: ReadonlyArray<string>): ReadonlyArray<string> => {
  const wanted = new Set(names.map((name) => name.toLowerCase()))
  const found: Array<string> = []
  if (wanted.size === 0) return found
  let budget = nestedBudget
  const queue: Array<{ readonly dir: string; readonly top: boolean }> = [{ dir: workspace, top: true }]
  for (let index = 0; index < queue.length && budget > 0; index++) {
    const next = queue[index]
    if (next === undefined) break
    let entries: Array<Dirent>
    try {
      entries = readdirSync(next.dir, { withFileTypes: true })
    } catch {
      continue
    }
    for (const entry of entries) {
      if (--budget < 0) break
      const path = NodePath.join(next.dir, entry.name)
      if (wanted.has(entry.name.toLowerCase())) {
        if (!next.top) found.push(path)
        continue
      }
      if (entry.isDirectory() && entry.name !== "node_modules") queue.push({ dir: path, top: false })
    }
  }
  return found
}

/**
 * The guards of a workspace: protected and hidden entries that lie inside it, as absolute paths.
 * An entry that is a bare name (`.git`) is held at the top level, and wherever `nested` finds it
 * now (so a submodule's `.git` file cannot be pointed at a folder of the agent's); `Shell` calls
 * this once, when the tools are built.
 */
export const guardsOf = (
  workspace: string,
  protectedPaths: ReadonlyArray<string>,
  hiddenPaths: ReadonlyArray<string>
): ReadonlyArray<Guard> => {
  const inside = (entry: string): ReadonlyArray<string> => {
    const absolute = NodePath.resolve(workspace, entry)
    return Confinement.below(workspace, absolute) ? [absolute] : []
  }
  const names = (entries: ReadonlyArray<string>) => entries.filter((entry) => !entry.includes("/"))
  return [
    ...protectedPaths.flatMap(inside).map((path) => ({ path, kind: "read-only" as const })),
    ...nested(workspace, names(protectedPaths)).map((path) => ({ path, kind: "read-only" as const })),
    ...hiddenPaths.flatMap(inside).map((path) => ({ path, kind: "hidden" as const })),
    ...nested(workspace, names(hiddenPaths)).map((path) => ({ path, kind: "hidden" as const }))
  ]
}

/** Protected and hidden entries, as a tools config holds them (`Config.protectedPaths`, `hiddenPaths`). */
export interface Entries {
  readonly protectedPaths: ReadonlyArray<string>
  readonly hiddenPaths: ReadonlyArray<string>
}

/** The real path of `path` (absolute), which may not exist: its nearest existing folder resolved, the rest as given. */
export const realPathOf = (path: string): string => {
  const rest: Array<string> = []
  let current = NodePath.resolve(path)
  for (;;) {
    const real = Either.try(() => realpathSync.native(current))
    if (Either.isRight(real)) return NodePath.join(real.right, ...rest)
    const parent = NodePath.dirname(current)
    if (parent === current) return NodePath.join(current, ...rest)
    rest.unshift(NodePath.basename(current))
    current = parent
  }
}

/**
 * The guards a sub-goal's tools hold when the goal that delegates it works in `workspace` with
 * `entries`: every guard of that workspace (`guardsOf`) as an absolute real path, so none is
 * resolved again against the sub-goal's folder, plus the entries themselves (not absolute), which
 * the sub-goal holds in its own folder as every goal does.
 */
export const inherited = (workspace: string, entries: Entries): Entries => {
  const root = realPathOf(workspace)
  const guards = guardsOf(root, entries.protectedPaths, entries.hiddenPaths)
  const own = (list: ReadonlyArray<string>) => list.filter((entry) => !NodePath.isAbsolute(entry))
  const held = (kind: Guard["kind"]) => guards.filter((guard) => guard.kind === kind).map((guard) => realPathOf(guard.path))
  const absolute = (list: ReadonlyArray<string>) => list.filter((entry) => NodePath.isAbsolute(entry))
  return {
    protectedPaths: [...new Set([...own(entries.protectedPaths), ...absolute(entries.protectedPaths), ...held("read-only")])],
    hiddenPaths: [...new Set([...own(entries.hiddenPaths), ...absolute(entries.hiddenPaths), ...held("hidden")])]
  }
}

/**
 * Why a sub-goal may not work in `folder` (a real path inside `workspace`, the real folder of the
 * goal that delegates it), or `undefined`: the folder is, lies inside, or holds a guard of that
 * workspace (`inherited`), or one of its folders is named like a bare entry (`.git`, compared
 * case-insensitively). Its tools would be rooted there, so such a guard could not hold.
 */
export const refusedFolder = (workspace: string, folder: string, entries: Entries): string | undefined => {
  const root = realPathOf(workspace)
  if (folder === root) return undefined
  const names = new Set([...entries.protectedPaths, ...entries.hiddenPaths].filter((entry) => !entry.includes("/")).map((entry) => entry.toLowerCase()))
  const named = (Confinement.segments(root, folder) ?? []).find((segment) => names.has(segment.toLowerCase()))
  if (named !== undefined) return `it is inside "${named}", which the agent may not change`
  const guards = inherited(root, entries)
  const all = [...guards.protectedPaths.map((path) => ({ path, kind: "read-only" })), ...guards.hiddenPaths.map((path) => ({ path, kind: "hidden" }))]
    .filter((guard) => NodePath.isAbsolute(guard.path))
  const what = (guard: { readonly path: string; readonly kind: string }) =>
    `"${NodePath.relative(root, guard.path) || "."}", which ${guard.kind === "hidden" ? "is hidden from the agent" : "the agent may not change"}`
  const within = all.find((guard) => Confinement.inside(guard.path, folder))
  if (within !== undefined) return `it is inside ${what(within)}`
  const holds = all.find((guard) => Confinement.below(folder, guard.path))
  return holds === undefined ? undefined : `it holds ${what(holds)}`
}

/**
 * How a sandbox holds the workspace's guards. Nothing is ever created in the workspace to hold
 * them: a mount needs an existing mount point, so only what exists is held by a mount; a
 * protected path that does not exist is listed in `missing`, and whatever a call creates there is
 * moved aside when the call ends (`moveAside`).
 */
export interface Held {
  /** bwrap's arguments for the workspace and its guards. */
  readonly args: ReadonlyArray<string>
  /**
   * Descriptors bwrap is given, in order from its fd 3 (`--bind-fd`, `--ro-bind-fd`): the workspace,
   * then each read-only guard. Empty when the workspace is bound by path. bwrap closes them before it
   * runs the command, so no descriptor of a folder outside the sandbox reaches it.
   */
  readonly fds: ReadonlyArray<number>
  /** Protected paths, relative to the root, that did not exist when the call started. */
  readonly missing: ReadonlyArray<string>
}

/** The first descriptor number a child gets beyond stdin, stdout and stderr. */
export const firstChildFd = 3

const nodeFlags = (directory: boolean) =>
  constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | (directory ? constants.O_DIRECTORY : 0)

/**
 * Open `segments` below the folder `dirFd`, one component at a time with no link followed: the
 * descriptor of the last one, `undefined` when a component is missing, or why it cannot be held
 * (a link, or a component that is not a folder).
 */
const openBelow = (dirFd: number, segments: ReadonlyArray<string>): Either.Either<number | undefined, string> => {
  let current = dirFd
  // Every return but the last closes the folder opened last.
  const release = () => {
    if (current !== dirFd) closeSync(current)
  }
  for (let i = 0; i < segments.length; i++) {
    const at = `/proc/self/fd/${current}/${segments[i]}`
    const last = i === segments.length - 1
    const info = Either.try(() => lstatSync(at))
    if (Either.isLeft(info)) {
      release()
      const code = Causes.codeOf(info.left)
      return code === "ENOENT" || code === "ENOTDIR"
        ? Either.right(undefined)
        : Either.left(`${segments.join("/")} cannot be checked to hold it: ${String(info.left)}`)
    }
    if (info.right.isSymbolicLink()) {
      release()
      return Either.left(`${segments.slice(0, i + 1).join("/")} is a symbolic link, which the sandbox cannot hold (the link could be replaced); replace it by what it points to, or remove it from the config`)
    }
    if (!last && !info.right.isDirectory()) {
      release()
      return Either.right(undefined)
    }
    const next = Either.try(() => openSync(at, nodeFlags(!last || info.right.isDirectory())))
    release()
    if (Either.isLeft(next)) return Either.left(`${segments.join("/")} cannot be opened to hold it: ${String(next.left)}`)
    current = next.right
  }
  return Either.right(current === dirFd ? undefined : current)
}

/**
 * Hold `guards` of the workspace `root` for one sandboxed process. With `rootFd` (the root opened
 * and checked by `Workspace.openRoot`), the workspace is bound from that descriptor and each
 * existing read-only guard from a descriptor opened below it with no link followed, so a folder or
 * link swapped in after the check is never what is mounted; the descriptors are closed with the
 * scope. Without it (a long-lived process started once), the workspace and guards are bound by
 * path. A read-only path is bound read-only over itself; a hidden file gets `/dev/null` bound over
 * it (bwrap binds with `nodev`, so it can be neither opened nor replaced); a hidden folder an
 * empty read-only tmpfs. A guard that is a symbolic link is refused (a mount would hold its
 * target, and the link itself could be replaced).
 */
export const hold = (
  root: string,
  guards: ReadonlyArray<Guard>,
  rootFd?: number
): Effect.Effect<Held, string, Scope.Scope> =>
  Effect.gen(function*() {
    const fds: Array<number> = []
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const fd of fds.slice(1)) closeSync(fd)
      })
    )
    const args: Array<string> = []
    const missing: Array<string> = []
    if (rootFd === undefined) args.push("--bind", root, root)
    else {
      fds.push(rootFd)
      args.push("--bind-fd", String(firstChildFd), root)
    }
    for (const guard of guards) {
      const segments = Confinement.segments(root, guard.path)
      if (segments === undefined || segments.length === 0) continue
      const relative = segments.join(NodePath.sep)
      if (rootFd === undefined) {
        const info = lstatOrUndefined(guard.path)
        if (info === undefined) {
          if (guard.kind === "read-only") missing.push(relative)
          continue
        }
        if (info.isSymbolicLink()) {
          return yield* Effect.fail(
            `the ${guard.kind} path ${relative} is a symbolic link, which the sandbox cannot hold (the link could be replaced); replace it by what it points to, or remove it from the config`
          )
        }
        if (guard.kind === "read-only") args.push("--ro-bind", guard.path, guard.path)
        else if (info.isDirectory()) args.push("--tmpfs", guard.path, "--remount-ro", guard.path)
        else args.push("--ro-bind", "/dev/null", guard.path)
        continue
      }
      const opened = openBelow(rootFd, segments)
      if (Either.isLeft(opened)) return yield* Effect.fail(`the ${guard.kind} path ${opened.left}`)
      const fd = opened.right
      if (fd === undefined) {
        if (guard.kind === "read-only") missing.push(relative)
        continue
      }
      const dest = NodePath.join(root, relative)
      if (guard.kind === "read-only") {
        fds.push(fd)
        args.push("--ro-bind-fd", String(firstChildFd + fds.length - 1), dest)
        continue
      }
      const directory = fstatSync(fd).isDirectory()
      closeSync(fd)
      if (directory) args.push("--tmpfs", dest, "--remount-ro", dest)
      else args.push("--ro-bind", "/dev/null", dest)
    }
    return { args, fds, missing }
  })

/**
 * After a call: move aside what it created at protected paths that were `missing` when it started,
 * so it never stays where rx protects it (a `.git` that would run hooks on the host, a config file
 * that would change the next run's settings). Each is renamed beside itself, to
 * `<name>.refused-by-rx-<tag>`, through the root's descriptor with no link followed (a link planted
 * there is moved, never followed). The paths moved, relative to the root.
 */
export const moveAside = (rootFd: number, missing: ReadonlyArray<string>, tag: string): ReadonlyArray<string> => {
  const moved: Array<string> = []
  for (const relative of missing) {
    const segments = relative.split(NodePath.sep)
    const name = segments[segments.length - 1] ?? relative
    const parent = segments.length === 1 ? Either.right(rootFd) : openBelow(rootFd, segments.slice(0, -1))
    if (Either.isLeft(parent) || parent.right === undefined) continue
    const dir = `/proc/self/fd/${parent.right}`
    try {
      if (lstatOrUndefined(`${dir}/${name}`) !== undefined) {
        renameSync(`${dir}/${name}`, `${dir}/${name}.refused-by-rx-${tag}`)
        moved.push(relative)
      }
    } catch {
      // Gone again, or not movable: nothing was moved.
    } finally {
      if (parent.right !== rootFd) closeSync(parent.right)
    }
  }
  return moved
}

const lstatOrUndefined = (path: string) => {
  try {
    return lstatSync(path)
  } catch {
    return undefined
  }
}

/**
 * Files and folders of the system folders that only root may read, found once per process when rx
 * runs as root. The sandbox runs as an unprivileged uid; but it must own the workspace, which root
 * owns, so in the kernel's eyes it is still root's files' owner: these are masked (a file by
 * `/dev/null`, a folder by an empty tmpfs) so it reads nothing an unprivileged user could not.
 * `/usr` outside `/usr/local` is searched three levels deep (a full walk costs most of a second).
 */
export const rootOnly = (): ReadonlyArray<{ readonly path: string; readonly directory: boolean }> => {
  if (rootOnlyFound !== undefined) return rootOnlyFound
  const found: Array<{ path: string; directory: boolean }> = []
  const walk = (dir: string, depth: number) => {
    let entries: Array<Dirent>
    try {
      entries = readdirSync(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      if (entry.isSymbolicLink()) continue
      const path = NodePath.join(dir, entry.name)
      const info = lstatOrUndefined(path)
      if (info === undefined) continue
      if (info.isDirectory()) {
        if ((info.mode & 0o005) !== 0o005) found.push({ path, directory: true })
        else if (depth > 0 || path === "/usr/local") walk(path, path === "/usr/local" ? Number.POSITIVE_INFINITY : depth - 1)
      } else if ((info.mode & 0o004) === 0) found.push({ path, directory: false })
    }
  }
  for (const path of systemPaths) {
    const info = lstatOrUndefined(path)
    if (info === undefined || !info.isDirectory()) continue
    walk(path, path === "/usr" ? 3 : Number.POSITIVE_INFINITY)
  }
  rootOnlyFound = found
  return found
}
let rootOnlyFound: ReadonlyArray<{ readonly path: string; readonly directory: boolean }> | undefined

/** The unprivileged uid and gid sandboxed processes run as when rx runs as root (`nobody`). */
export const unprivileged = 65_534

/** What a process started on request may have beyond the shell's sandbox (an MCP server the user sandboxes). */
export interface BwrapOptions {
  /** Keep the host's network (the shell never has it). */
  readonly network?: boolean
  /** Absolute folders bound read-only at their own path, before the workspace. */
  readonly readOnly?: ReadonlyArray<string>
}

/**
 * bwrap's arguments to run `argv` in `cwd`, with the workspace (and its guards) mounted by
 * `workspaceArgs` (`hold`), and the private `/tmp` (held in memory) at most `tmpBytes` when given;
 * `options` add the network or read-only folders for a process sandboxed on request.
 * When rx runs as root, the command runs as uid and gid 65534 in a user namespace of its own and
 * root-only system files are masked (`rootOnly`).
 */
export const bwrapArgs = (
  cwd: string,
  argv: ReadonlyArray<string>,
  workspaceArgs: ReadonlyArray<string>,
  tmpBytes?: number,
  options: BwrapOptions = {}
): ReadonlyArray<string> => {
  const args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
  if (options.network === true) args.push("--share-net")
  const root = process.getuid?.() === 0
  if (root) args.push("--unshare-user", "--uid", String(unprivileged), "--gid", String(unprivileged))
  for (const path of systemPaths) {
    try {
      const info = lstatSync(path)
      if (info.isSymbolicLink()) args.push("--symlink", readlinkSync(path), path)
      else if (info.isDirectory()) args.push("--ro-bind", path, path)
    } catch {
      continue
    }
  }
  if (root) {
    for (const masked of rootOnly()) {
      if (masked.directory) args.push("--tmpfs", masked.path, "--remount-ro", masked.path)
      else args.push("--ro-bind", "/dev/null", masked.path)
    }
  }
  args.push("--proc", "/proc", "--dev", "/dev")
  if (tmpBytes !== undefined) args.push("--size", String(tmpBytes))
  args.push("--tmpfs", "/tmp")
  for (const folder of options.readOnly ?? []) args.push("--ro-bind", folder, folder)
  args.push(...workspaceArgs, "--chdir", cwd, "--", ...argv)
  return args
}

/** Run `true` in the sandbox under `prlimit`: `undefined` if it works, else why not. */
export const probe = (bwrap: string, workspace: string, prlimit?: string): Effect.Effect<string | undefined> =>
  Effect.async<string | undefined>((resume) => {
    let stderr = ""
    let done = false
    const argv = prlimit === undefined ? ["/bin/sh", "-c", "true"] : [prlimit, "--core=0", "--", "/bin/sh", "-c", "true"]
    const child = spawn(bwrap, [...bwrapArgs(workspace, argv, ["--bind", workspace, workspace])], {
      env: { PATH: "/usr/bin:/bin" },
      stdio: ["ignore", "ignore", "pipe"]
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      if (!done) {
        done = true
        resume(Effect.succeed("bwrap did not finish a trivial command within 10 s"))
      }
    }, 10_000)
    child.stderr?.on("data", (chunk: Buffer) => {
      if (stderr.length < 2_000) stderr += chunk.toString("utf8")
    })
    child.once("error", (error) => {
      clearTimeout(timer)
      if (!done) {
        done = true
        resume(Effect.succeed(`${bwrap} could not be started: ${error.message}`))
      }
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      if (done) return
      done = true
      resume(Effect.succeed(code === 0 ? undefined : `${bwrap} failed (exit ${code}): ${stderr.trim() || "no message"}`))
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

/**
 * Decide the sandbox for a mode; only `bwrap` fails, `auto` falls back to `Unavailable`.
 * `bwrapPath` replaces the trusted locations searched.
 */
export const resolve = (
  mode: SandboxMode,
  workspace: string,
  bwrapPath?: string
): Effect.Effect<Sandbox, SandboxUnavailable> =>
  Effect.gen(function*() {
    const prlimit = findPrlimit(workspace)
    if (mode === "none") return { _tag: "None", prlimit: Either.getOrUndefined(prlimit) } as const
    const unavailable = (reason: string) =>
      mode === "bwrap"
        ? Effect.fail(new SandboxUnavailable({ reason }))
        : Effect.succeed<Sandbox>({ _tag: "Unavailable", reason })
    const found = find(workspace, bwrapPath)
    if (Either.isLeft(found)) return yield* unavailable(`${found.left}; ${installHint}`)
    if (Either.isLeft(prlimit)) {
      return yield* unavailable(`${prlimit.left}; install util-linux, or choose sandbox mode \`none\``)
    }
    const problem = yield* probe(found.right, workspace, prlimit.right)
    if (problem !== undefined) {
      return yield* unavailable(
        `${problem}; bubblewrap needs user namespaces (check sysctl kernel.unprivileged_userns_clone and user.max_user_namespaces, or the container's seccomp/AppArmor profile), or choose sandbox mode \`none\``
      )
    }
    const setuid = Option.getOrElse(
      Option.liftThrowable(() => (statSync(found.right).mode & 0o4000) !== 0)(),
      () => false
    )
    const help = spawnSync(found.right, ["--help"], { encoding: "utf8", env: { PATH: "/usr/bin:/bin" }, timeout: 10_000 })
    const tmpfsSize = `${help.stdout ?? ""}`.includes("--size")
    return { _tag: "Bwrap", path: found.right, prlimit: prlimit.right, setuid, tmpfsSize } as const
  })
