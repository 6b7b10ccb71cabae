/**
 * Where `shell` commands run. With bubblewrap (`bwrap`), a command sees a read-only system
 * (`/usr`, `/etc`, `/opt` and the `/bin`, `/lib*`, `/sbin` links), the workspace writable at its
 * own path, a private `/tmp`, fresh `/proc` and `/dev`; it has no network (a new, empty network
 * namespace), no capabilities (even when rx runs as root), a new PID namespace and session, and
 * it dies with rx (`--die-with-parent`). bwrap itself is started with the scrubbed environment,
 * so its init process (`/proc/1/environ` inside) shows nothing more.
 *
 * Modes: `bwrap` requires it (the Layer fails when it is missing or cannot create namespaces);
 * `auto` uses it when it works and otherwise refuses shell calls with an error that says how to
 * install it or to choose `none`; `none` runs commands directly, with the same timeout, process
 * tree handling, output cap and environment allow-list, but no isolation.
 */
import { Effect, Option, Schema } from "effect"
import { spawn } from "node:child_process"
import { accessSync, constants, lstatSync, readlinkSync } from "node:fs"
import * as NodePath from "node:path"
import type { SandboxMode } from "./Config.js"

/** The sandbox `shell` uses, decided once when the tools are built. */
export type Sandbox =
  | { readonly _tag: "Bwrap"; readonly path: string }
  | { readonly _tag: "None" }
  | { readonly _tag: "Unavailable"; readonly reason: string }

/** Mode `bwrap` was asked for and bubblewrap cannot be used. */
export class SandboxUnavailable extends Schema.TaggedError<SandboxUnavailable>()("SandboxUnavailable", {
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

/** The `bwrap` on PATH, if any. */
export const find = (pathVariable: string | undefined): Option.Option<string> => {
  const dirs = (pathVariable ?? "").split(":").filter((dir) => dir !== "")
  for (const dir of dirs) {
    const candidate = NodePath.join(dir, "bwrap")
    try {
      accessSync(candidate, constants.X_OK)
      return Option.some(candidate)
    } catch {
      continue
    }
  }
  return Option.none()
}

/** bwrap's arguments to run `argv` in `cwd`, with `workspace` writable. */
export const bwrapArgs = (workspace: string, cwd: string, argv: ReadonlyArray<string>): ReadonlyArray<string> => {
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
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
  args.push("--bind", workspace, workspace, "--chdir", cwd, "--", ...argv)
  return args
}

/** Run `true` in the sandbox: `undefined` if it works, else why not. */
export const probe = (bwrap: string, workspace: string): Effect.Effect<string | undefined> =>
  Effect.async<string | undefined>((resume) => {
    let stderr = ""
    let done = false
    const child = spawn(bwrap, [...bwrapArgs(workspace, workspace, ["/bin/sh", "-c", "true"])], {
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

/** Decide the sandbox for a mode; only `bwrap` fails, `auto` falls back to refusing calls. */
export const resolve = (mode: SandboxMode, workspace: string): Effect.Effect<Sandbox, SandboxUnavailable> =>
  Effect.gen(function*() {
    if (mode === "none") return { _tag: "None" } as const
    const found = find(process.env["PATH"])
    if (Option.isNone(found)) {
      const reason = `bwrap was not found on PATH; ${installHint}`
      if (mode === "bwrap") return yield* new SandboxUnavailable({ reason })
      return { _tag: "Unavailable", reason } as const
    }
    const problem = yield* probe(found.value, workspace)
    if (problem !== undefined) {
      const reason = `${problem}; bubblewrap needs user namespaces (check sysctl kernel.unprivileged_userns_clone and user.max_user_namespaces, or the container's seccomp/AppArmor profile), or choose sandbox mode \`none\``
      if (mode === "bwrap") return yield* new SandboxUnavailable({ reason })
      return { _tag: "Unavailable", reason } as const
    }
    return { _tag: "Bwrap", path: found.value } as const
  })
