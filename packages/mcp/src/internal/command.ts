/**
 * How a stdio server's command runs as the user, and whether it may: the agent writes the
 * workspace, so nothing of it may become code that runs unsandboxed.
 *
 * - The program is found on the server's PATH (whose folders inside the workspace are dropped)
 *   or taken as a path (relative to the workspace); its real path must lie outside the
 *   workspace.
 * - No argument may name code inside the workspace: an interpreter's script, file or folder
 *   (`node srv.mjs`, `python x.py`, `node .`), or any file with a code's extension or the
 *   executable bit (`npx tsx srv.ts`, `deno run srv.ts`). Data files may be named.
 * - `npx` and `uvx` run in a private folder outside the workspace, so they never take a package
 *   from the workspace's `node_modules` nor read its `.npmrc` or `uv.toml`; a package given as a
 *   path inside the workspace is refused. Their arguments `.`, `..`, `./…` and `../…` are paths
 *   of the workspace, passed as absolute paths (`npx -y @modelcontextprotocol/server-filesystem .`
 *   serves the workspace). `npx` installs its package first (`install`): a download is not
 *   counted in the start timeout.
 */
import { Sandbox } from "@rx/tools"
import { Either } from "effect"
import { accessSync, constants, existsSync, realpathSync, statSync } from "node:fs"
import * as NodePath from "node:path"

export interface Plan {
  /** The program, as an absolute path. */
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** Where it runs: the workspace, or a private folder outside it (`npx`, `uvx`). */
  readonly runsIn: "workspace" | "private"
  /** `npx`: the arguments of `file` that install its package into npx's cache, and run nothing of it. */
  readonly install?: ReadonlyArray<string>
}

/** The real path of `path`, or the path itself when it does not exist. */
const real = (path: string): string => {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

const insideOf = (workspace: string, path: string): boolean => {
  const within = (root: string, candidate: string) => {
    const relative = NodePath.relative(root, candidate)
    return relative === "" || (!relative.startsWith("..") && !NodePath.isAbsolute(relative))
  }
  return within(workspace, NodePath.resolve(path)) || within(workspace, real(path))
}

/** Files that hold code a program may run, by their extension. */
const code = /\.(m?[jt]sx?|c[jt]s|py[cwz]?|rb|pl|pm|php|sh|bash|zsh|lua|jar|wasm|node|so)$/i

/**
 * Whether `path`, in the workspace by path or real path, is code: a file with a code's
 * extension or the executable bit, or any file or folder when it is an interpreter's script.
 */
const codeInWorkspace = (workspace: string, path: string, script: boolean): boolean => {
  if (!insideOf(workspace, path)) return false
  try {
    const info = statSync(path)
    if (script) return info.isFile() || info.isDirectory()
    return info.isFile() && (code.test(path) || code.test(real(path)) || (info.mode & 0o111) !== 0)
  } catch {
    return false
  }
}

const executable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}

/** The folders of a PATH value that lie outside the workspace, by path and by real path. */
export const safePath = (path: string, workspace: string): ReadonlyArray<string> =>
  path.split(":").filter((folder) => NodePath.isAbsolute(folder) && !insideOf(workspace, folder))

/** Programs whose first argument that is not an option is code they run (a file, or a folder). */
const interpreter = /^(node|nodejs|bun|deno|python[0-9.]*|pypy[0-9.]*|ruby|perl|php|tsx|ts-node|sh|bash|dash|zsh)$/

/** Options of `npx` (npm exec) that take the next argument as their value. */
const npxValued = new Set(["-p", "--package", "-c", "--call", "-w", "--workspace", "--registry", "--cache", "--userconfig", "--prefix", "--node-options", "--script-shell"])

/** Options of `uvx` (uv tool run) that take the next argument as their value. */
const uvxValued = new Set([
  "--from", "--with", "-w", "--with-editable", "--with-requirements", "-p", "--python", "-c", "--constraints", "--overrides", "--build-constraints",
  "--index", "--default-index", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--index-strategy", "--keyring-provider",
  "--resolution", "--prerelease", "--fork-strategy", "--exclude-newer", "--no-build-package", "--no-binary-package", "--refresh-package",
  "--reinstall-package", "--link-mode", "--compile-bytecode", "--cache-dir", "--config-file", "--directory", "--project", "--env-file",
  "--python-preference", "--color", "--allow-insecure-host", "--config-setting", "-C", "--upgrade-package", "-P"
])
/** Options of `uvx` whose value is a package (a path to one is code). */
const uvxPackages = new Set(["--from", "--with", "-w", "--with-editable", "--with-requirements"])

/** A package spec that is a path: `./pkg`, `/abs`, `~/x`, `file:x`. */
const pathSpec = (spec: string): string | undefined =>
  spec.startsWith("file:") ? spec.slice(5) : /^(\.|\/|~)/.test(spec) ? spec : undefined

/** An argument of a launched server that names a path of the workspace, made absolute. */
const workspaceArg = (arg: string, workspace: string): string =>
  arg === "." || arg === ".." || arg.startsWith("./") || arg.startsWith("../") ? NodePath.resolve(workspace, arg) : arg

/**
 * Split a launcher's arguments: its options (each with its value), and the command or package
 * with what follows; `valued` names the options that take the next argument.
 */
const splitLauncher = (args: ReadonlyArray<string>, valued: ReadonlySet<string>) => {
  const options: Array<string> = []
  const values: Array<readonly [string, string]> = []
  let i = 0
  for (; i < args.length; i++) {
    const arg = args[i] ?? ""
    if (arg === "--") {
      i++
      break
    }
    if (!arg.startsWith("-")) break
    options.push(arg)
    const eq = arg.indexOf("=")
    if (eq > 0) values.push([arg.slice(0, eq), arg.slice(eq + 1)])
    else if (valued.has(arg) && i + 1 < args.length) {
      const value = args[++i] ?? ""
      options.push(value)
      values.push([arg, value])
    }
  }
  return { options, values, rest: args.slice(i) }
}

/**
 * What a sandboxed server's program needs bound read-only to be found in the sandbox, which
 * mounts only the system folders and the workspace: a program outside them (a Node installed by
 * nvm, or in a cache) brings its installation (the parent of its `bin` folder when that holds
 * `lib/node_modules`, where `npx` and global packages live) or else its own folder.
 */
export const sandboxReads = (program: string, workspace: string, path: string): ReadonlyArray<string> => {
  const found = program.includes("/")
    ? NodePath.resolve(workspace, program)
    : safePath(path, real(workspace)).map((folder) => NodePath.join(folder, program)).find(executable)
  if (found === undefined) return []
  const system = (file: string) => Sandbox.systemPaths.some((folder) => file === folder || file.startsWith(`${folder}/`))
  const reads = new Set<string>()
  for (const file of [found, real(found)]) {
    if (system(file) || insideOf(workspace, file)) continue
    const folder = NodePath.dirname(file)
    const installation = NodePath.dirname(folder)
    reads.add(NodePath.basename(folder) === "bin" && existsSync(NodePath.join(installation, "lib", "node_modules")) ? installation : folder)
  }
  return [...reads]
}

/**
 * The plan of a stdio server run as the user, or why it is refused (a sentence, starting with
 * "refused:"), or why it cannot start (its program is not found).
 */
export const plan = (command: readonly [string, ...Array<string>], workspace: string, path: string): Either.Either<Plan, string> => {
  const [program, ...given] = command
  const root = real(workspace)
  const allow = "run it sandboxed (--mcp-sandbox NAME, or \"sandbox\" in your config file's mcpServers) or from a folder outside the workspace"
  const refused = (what: string) => Either.left(`refused: ${what} lies in the workspace ${workspace}, which the agent can write, and it would run as you, unsandboxed; ${allow}`)
  let file: string | undefined
  if (program.includes("/")) {
    file = NodePath.resolve(workspace, program)
    if (!existsSync(file)) return Either.left(`${program} does not exist`)
    if (insideOf(root, file) || insideOf(workspace, file)) return refused(`its program ${file}`)
    if (!executable(file)) return Either.left(`${program} is not an executable file`)
  } else {
    file = safePath(path, root).map((folder) => NodePath.join(folder, program)).find(executable)
    if (file === undefined) return Either.left(`${program} was not found on its PATH (${path}); folders inside the workspace are not searched`)
  }
  if (insideOf(root, file) || insideOf(workspace, file)) return refused(`its program ${file}`)
  const name = NodePath.basename(program)
  const launcher = name === "npx" ? npxValued : name === "uvx" ? uvxValued : undefined
  if (launcher === undefined) {
    const checked = checkArgs(given, root, workspace, interpreter.test(name))
    return checked === undefined ? Either.right({ file, args: given, runsIn: "workspace" }) : refused(checked)
  }
  const { options, rest, values } = splitLauncher(given, launcher)
  const packages = [
    ...values.filter(([option]) => (name === "npx" ? option === "-p" || option === "--package" : uvxPackages.has(option))).map(([, value]) => value),
    ...(rest[0] === undefined ? [] : [rest[0]])
  ]
  for (const spec of packages) {
    const local = pathSpec(spec)
    if (local !== undefined && insideOf(root, NodePath.resolve(workspace, local))) return refused(`its package ${spec}`)
  }
  const args = [...options, ...(rest.length === given.length - options.length ? [] : ["--"]), ...rest.map((arg, i) => (i === 0 ? arg : workspaceArg(arg, workspace)))]
  const checked = checkArgs(args, root, workspace, false)
  if (checked !== undefined) return refused(checked)
  const called = values.some(([option]) => option === "-c" || option === "--call")
  const hasPackage = values.some(([option]) => option === "-p" || option === "--package")
  const install = name === "npx" && !called && rest[0] !== undefined
    ? [...options, ...(hasPackage ? [] : ["--package", rest[0]]), "--", "true"]
    : undefined
  return Either.right({ file, args, runsIn: "private", ...(install === undefined ? {} : { install }) })
}

/** What of `args` names code in the workspace, in words, if anything. */
const checkArgs = (args: ReadonlyArray<string>, root: string, workspace: string, isInterpreter: boolean): string | undefined => {
  let script = isInterpreter
  for (const arg of args) {
    const value = arg.startsWith("-") && arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : arg
    if (value === "") continue
    const path = NodePath.resolve(workspace, value)
    const isScript = script && !arg.startsWith("-")
    if (isScript) script = false
    if (codeInWorkspace(root, path, isScript) || codeInWorkspace(workspace, path, isScript)) return `its ${isScript ? "script" : "argument"} ${arg}`
  }
  return undefined
}
