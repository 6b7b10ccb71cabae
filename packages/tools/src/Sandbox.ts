/**
 * Where `shell` commands run. With bubblewrap (`bwrap`), a command sees a read-only system
 * (`/usr`, `/etc`, `/opt` and the `/bin`, `/lib*`, `/sbin` links), the workspace writable at its
 * own path but for its protected paths (read-only) and hidden paths (neither readable nor
 * writable), a private `/tmp`, fresh `/proc` and `/dev`; it has no network (a new, empty network
 * namespace), no capabilities (even when rx runs as root), a new PID namespace and session, and
 * it dies with rx (`--die-with-parent`). bwrap itself is started with the scrubbed environment,
 * so its init process (`/proc/1/environ` inside) shows nothing more.
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
import { Effect, Either, Option, Schema } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { closeSync, constants, type Dirent, lstatSync, mkdirSync, openSync, readdirSync, readlinkSync, realpathSync, statSync } from "node:fs"
import * as NodePath from "node:path"
import type { SandboxMode } from "./Config.js"

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

/** System folders mounted read-only when present; links among them are recreated as links. */
const systemPaths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]

/** Where bubblewrap is looked for, in order, when no `bwrapPath` is configured. */
export const trustedBwrap: ReadonlyArray<string> = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]

/** Where `prlimit` (util-linux) is looked for. */
export const trustedPrlimit: ReadonlyArray<string> = ["/usr/bin/prlimit", "/bin/prlimit"]

const within = (root: string, path: string): boolean => path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`)

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined

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
    return errorCode(error) === "ENOENT" ? `${path} does not exist` : `${path} cannot be resolved: ${String(error)}`
  }
  try {
    realWorkspace = realpathSync(workspace)
  } catch {
    // The workspace as given.
  }
  if (within(realWorkspace, real) || within(realWorkspace, NodePath.resolve(path)) || within(workspace, NodePath.resolve(path))) {
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
    return absolute !== workspace && within(workspace, absolute) ? [absolute] : []
  }
  const names = (entries: ReadonlyArray<string>) => entries.filter((entry) => !entry.includes("/"))
  return [
    ...protectedPaths.flatMap(inside).map((path) => ({ path, kind: "read-only" as const })),
    ...nested(workspace, names(protectedPaths)).map((path) => ({ path, kind: "read-only" as const })),
    ...hiddenPaths.flatMap(inside).map((path) => ({ path, kind: "hidden" as const })),
    ...nested(workspace, names(hiddenPaths)).map((path) => ({ path, kind: "hidden" as const }))
  ]
}

/** bwrap mounts that hold the guards, and the folders made to hold missing ones. */
export interface Mounts {
  readonly args: ReadonlyArray<string>
  /** Folders rx created as mount points, to remove after the call when still empty. */
  readonly created: ReadonlyArray<string>
}

/**
 * The mounts holding `guards` now, or why they cannot be held. A read-only path is bound
 * read-only over itself; a missing one is first created as an empty folder, so the command cannot
 * create it (`git init` would otherwise plant hooks that run on the host). A hidden file gets
 * `/dev/null` bound over it (bwrap binds with `nodev`, so it can be neither opened nor replaced);
 * a hidden folder an empty read-only tmpfs; a missing hidden path is first created as an empty
 * file (mode 600), so the command cannot plant it (a database's `-journal` is replayed when
 * found). A guard that is a symbolic link is refused: a mount would hold its target, and the link
 * itself could be replaced.
 */
export const mounts = (workspace: string, guards: ReadonlyArray<Guard>): Either.Either<Mounts, string> => {
  const args: Array<string> = []
  const created: Array<string> = []
  for (const guard of guards) {
    let parent: string
    try {
      parent = realpathSync(NodePath.dirname(guard.path))
    } catch {
      // Its folder does not exist: there is nothing to hold yet.
      continue
    }
    if (!within(workspace, parent)) continue
    const target = NodePath.join(parent, NodePath.basename(guard.path))
    const relative = NodePath.relative(workspace, target)
    let info = lstatOrUndefined(target)
    if (info === undefined) {
      try {
        if (guard.kind === "read-only") {
          mkdirSync(target, { mode: 0o755 })
          created.push(target)
        } else {
          closeSync(openSync(target, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW, 0o600))
        }
      } catch (error) {
        if (errorCode(error) !== "EEXIST") return Either.left(`the ${guard.kind} path ${relative} could not be created to hold it: ${String(error)}`)
      }
      info = lstatOrUndefined(target)
      if (info === undefined) return Either.left(`the ${guard.kind} path ${relative} vanished while being held`)
    }
    if (info.isSymbolicLink()) {
      return Either.left(
        `the ${guard.kind} path ${relative} is a symbolic link, which the sandbox cannot hold (the link could be replaced); replace it by what it points to, or remove it from the config`
      )
    }
    if (guard.kind === "read-only") args.push("--ro-bind", target, target)
    else if (info.isDirectory()) args.push("--tmpfs", target, "--remount-ro", target)
    else args.push("--ro-bind", "/dev/null", target)
  }
  return Either.right({ args, created })
}

const lstatOrUndefined = (path: string) => {
  try {
    return lstatSync(path)
  } catch {
    return undefined
  }
}

/**
 * bwrap's arguments to run `argv` in `cwd`, with `workspace` writable but for the `guards`
 * mounts, and the private `/tmp` (held in memory) at most `tmpBytes` when given.
 */
export const bwrapArgs = (
  workspace: string,
  cwd: string,
  argv: ReadonlyArray<string>,
  guards: ReadonlyArray<string> = [],
  tmpBytes?: number
): ReadonlyArray<string> => {
  const args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
  for (const path of systemPaths) {
    try {
      const info = lstatSync(path)
      if (info.isSymbolicLink()) args.push("--symlink", readlinkSync(path), path)
      else if (info.isDirectory()) args.push("--ro-bind", path, path)
    } catch {
      continue
    }
  }
  args.push("--proc", "/proc", "--dev", "/dev")
  if (tmpBytes !== undefined) args.push("--size", String(tmpBytes))
  args.push("--tmpfs", "/tmp")
  args.push("--bind", workspace, workspace, ...guards, "--chdir", cwd, "--", ...argv)
  return args
}

/** Run `true` in the sandbox under `prlimit`: `undefined` if it works, else why not. */
export const probe = (bwrap: string, workspace: string, prlimit?: string): Effect.Effect<string | undefined> =>
  Effect.async<string | undefined>((resume) => {
    let stderr = ""
    let done = false
    const argv = prlimit === undefined ? ["/bin/sh", "-c", "true"] : [prlimit, "--core=0", "--", "/bin/sh", "-c", "true"]
    const child = spawn(bwrap, [...bwrapArgs(workspace, workspace, argv)], {
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
