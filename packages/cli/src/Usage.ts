/**
 * What the `rx` command line accepts, and its help. Each command is declared once here: its
 * argument, its settings (each an @effect/cli option generated from `Settings.table`, decoded by
 * the setting's own text Schema) and its other flags (typed @effect/cli options). `Commands` gives
 * each declaration its body, `Cli` checks and parses a command line against them, and this module
 * writes the compact help from the same declarations.
 */
import { Args, HelpDoc, Options, ValidationError } from "@effect/cli"
import * as Settings from "@rx/host/Settings"
import * as Version from "@rx/host/Version"
import { type Array as Arr, Effect, Either, Option, type Schema } from "effect"
import * as ExitCode from "./ExitCode.js"

/** The package's version, fixed when the binary is bundled ("development" in an unbundled build). */
export const version: string = Version.version

/** A flag as the help and the command line's check know it: its name, what it takes (`N`, empty for a switch), its help line. */
export interface FlagDoc {
  readonly flag: string
  readonly placeholder: string
  readonly description: string
}

/** A flag, with the typed @effect/cli option that reads it. */
export interface Flag<A> extends FlagDoc {
  readonly option: Options.Options<A>
}

/** A flag's text decoded by `schema`; a value refused is the one line `--flag: expected <what>, got <text>`. */
const decoding = <A>(flag: string, schema: Schema.Schema<A, string>) => (raw: string) =>
  Either.match(Settings.decodeFlag(flag, schema, raw), {
    onLeft: (error) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(error.message))),
    onRight: (value) => Effect.succeed(value)
  })

/** A switch. */
export const toggle = (flag: string, description: string): Flag<boolean> => ({
  flag,
  placeholder: "",
  description,
  option: Options.boolean(flag).pipe(Options.withDescription(description))
})

const text = (flag: string, placeholder: string, description: string) =>
  Options.text(flag).pipe(Options.withPseudoName(placeholder), Options.withDescription(description))

/** A flag that takes a value, decoded by `schema` when given (plain text without one). */
export function value(flag: string, placeholder: string, description: string): Flag<Option.Option<string>>
export function value<A>(flag: string, placeholder: string, description: string, schema: Schema.Schema<A, string>): Flag<Option.Option<A>>
export function value<A>(flag: string, placeholder: string, description: string, schema?: Schema.Schema<A, string>): Flag<Option.Option<A | string>> {
  const read = text(flag, placeholder, description)
  const option: Options.Options<A | string> = schema === undefined ? read : Options.mapEffect(read, decoding(flag, schema))
  return { flag, placeholder, description, option: Options.optional(option) }
}

/** A whole number from `min` to `max`, read by the settings' own number Schema. */
export const count = (flag: string, placeholder: string, description: string, min: number, max: number) =>
  value(flag, placeholder, description, Settings.integer(min, max).text)

/** A flag given as often as wanted, each value kept (`--mcp a=... --mcp b=...`). */
export const repeated = (flag: string, placeholder: string, description: string): Flag<ReadonlyArray<string>> => ({
  flag,
  placeholder,
  description,
  option: Options.repeated(text(flag, placeholder, description))
})

/** A setting's flag as the help shows it, from its row of `Settings.table`: its description says its default and its variable. */
const settingDoc = (key: Settings.Key): FlagDoc => {
  const s: Settings.Doc = Settings.table[key]
  const notes = [...(s.shownDefault === undefined ? [] : [`default ${s.shownDefault}`]), `env ${s.env}`]
  return { flag: s.flag, placeholder: s.placeholder, description: `${s.description} (${notes.join("; ")})` }
}

/** A setting as a flag, read by its own text Schema. */
export const setting = (key: Settings.Key): Flag<Option.Option<Settings.Value> | boolean> => {
  const { description, flag, placeholder } = settingDoc(key)
  return Settings.isSwitch(key) ? toggle(flag, description) : value(flag, placeholder, description, Settings.textOf(key))
}

/** Options by key, read together (none: an empty record). */
export const all = (options: Readonly<Record<string, Options.Options<unknown>>>): Options.Options<Readonly<Record<string, unknown>>> =>
  Object.keys(options).length === 0 ? Options.map(Options.none, () => ({})) : Options.all(options)

/** The typed values of a command's settings, those given (a switch given is `true`). */
export const settings = (keys: ReadonlyArray<Settings.Key>): Options.Options<Settings.Given> =>
  Options.map(
    all(Object.fromEntries(keys.map((key) => [key, setting(key).option]))),
    (given) =>
      Object.fromEntries(
        Object.entries(given).flatMap(([key, v]) => (v === true ? [[key, true]] : Option.isOption(v) && Option.isSome(v) ? [[key, v.value]] : []))
      ) as Settings.Given
  )

/** A command as the command line accepts it and its help shows it. */
export interface Doc {
  readonly name: string
  readonly summary: string
  /** Usage lines after `rx <name> `. */
  readonly usage: ReadonlyArray<string>
  readonly description: string
  /** The positional argument it takes (`goal-id`), if any; run's may be left out (`--goal-file`). */
  readonly arg?: { readonly name: string; readonly description: string; readonly optional?: boolean; readonly repeated?: boolean }
  /** A second positional argument after `arg` (`rx say <goal-id> <text>`), if any. */
  readonly more?: { readonly name: string; readonly description: string }
  readonly settings: ReadonlyArray<Settings.Key>
  readonly flags: Readonly<Record<string, Flag<unknown>>>
}

/** What a command's body is given: its settings, typed; its argument; each of its flags by its key, typed. */
export type Input<D extends Doc> =
  & { readonly settings: Settings.Given; readonly arg: D["arg"] extends { readonly repeated: true } ? ReadonlyArray<string> : Option.Option<string>; readonly more: Option.Option<string> }
  & { readonly [K in keyof D["flags"]]: D["flags"][K] extends Flag<infer A> ? A : never }

/** The command's argument as @effect/cli reads it, if it takes one. */
export const argument = (doc: Doc): Args.Args<Option.Option<string> | ReadonlyArray<string>> => {
  if (doc.arg === undefined) return Args.map(Args.none, () => Option.none())
  const arg = Args.text({ name: doc.arg.name }).pipe(Args.withDescription(doc.arg.description))
  if (doc.arg.repeated === true) return Args.repeated(arg)
  return doc.arg.optional === true ? Args.optional(arg) : Args.map(arg, Option.some)
}

/** The command's second argument as @effect/cli reads it, if it takes one. */
export const second = (doc: Doc): Args.Args<Option.Option<string>> =>
  doc.more === undefined ? Args.map(Args.none, () => Option.none()) : Args.map(Args.text({ name: doc.more.name }).pipe(Args.withDescription(doc.more.description)), Option.some)

/** Every flag a command accepts, as the help shows it (no option is built): its settings', then its own. */
export const accepted = (doc: Doc): ReadonlyArray<FlagDoc> => [...doc.settings.map(settingDoc), ...Object.values(doc.flags)]

const { limitKeys: limits, mcpKeys: mcp, modelKeys: model, resumeKeys: resumeSettings, runKeys: runSettings, toolKeys: tools } = Settings

const clusterRun = toggle(
  "cluster",
  "hand the goal to the workers (rx worker) of the Postgres log --db names, and follow it; its workspace is a folder of their shared root, and they run it with their own model"
)
const failoverFlag = count(
  "failover",
  "SECONDS",
  "how long a dead worker keeps its goals before the others take them over; the same on every worker and serve of a cluster (default 15)",
  1,
  3_600
)
const callFlag = value("call", "CALL", "the call to decide, as rx inspect names it (default: the call the goal waits on)")
const byFlag = value("by", "NAME", "who decides, as recorded (default: your user name)")
const goalFile = value("goal-file", "FILE", "read the goal from a text file (a long goal cannot be an argument)")
const continueFlag = value(
  "continue",
  "GOAL-ID",
  "start a new goal that continues this ended one: its goal, what it did (how it ended, its summary, its last steps), and the argument as the new instruction (default \"continue\"); fresh limits"
)
const mcpFlag = repeated(
    "mcp",
    "NAME=CMD|URL",
    "an MCP server whose tools the model may call, as NAME__tool: a command started over stdio, or an http(s) URL; repeatable. A command runs as you would run it in a terminal (your PATH and home, the network: it is a program you chose; what rx guards against is the model's calls to it), in the workspace, with PATH, HOME, LANG, TMPDIR and the like, plus its --mcp-env, and none of rx's other variables (RX_TOKEN, the API key); --mcp-sandbox runs it in bubblewrap instead"
  )
const mcpEnvFlag = repeated("mcp-env", "NAME=VAR=VALUE", "a variable for the MCP server NAME (NAME=VAR takes VAR's value from rx's environment); never recorded: rx resume needs it again; repeatable")
const mcpSandboxFlag = repeated(
    "mcp-sandbox",
    "NAME[=network]",
    "run the MCP server NAME in bubblewrap: the system folders read-only, the workspace writable, no home folder, no network unless =network (the folders it may read: \"sandbox\": {\"read\": [...]} in your config file's mcpServers); recorded; repeatable"
  )

const goalId = { name: "goal-id", description: "the goal's id, as rx list shows it" }

export const json = toggle("json", "print each event as one JSON line (and nothing else on stdout)")

export const run = {
  name: "run",
  summary: "run a goal until it terminates or must wait",
  usage: ["[flags] \"<goal>\"", "[flags] --goal-file FILE", "[flags] -          (the goal from standard input)", "[flags] --continue <goal-id> [\"<instruction>\"]"],
  description: [
    "Runs the goal to its end, or until it must wait (suspended, exit 11: rx resume continues it). One line per step, the model's thoughts, and on a terminal a live line saying what runs.",
    "Ctrl-C cancels the goal (recorded, exit 7); SIGTERM, or SIGHUP (the terminal closed), stops it gracefully and leaves it open (exit 11). A call of a tool in --ask waits for approval: asked in place at a terminal (y, n, or a = always for that tool), otherwise the goal suspends until rx approve or rx deny, then rx resume."
  ].join("\n\n"),
  arg: { name: "goal", description: "what to achieve, in quotes; - reads it from standard input", optional: true },
  settings: [...runSettings, "server"],
  flags: { goalFile, continues: continueFlag, mcp: mcpFlag, mcpEnv: mcpEnvFlag, mcpSandbox: mcpSandboxFlag, cluster: clusterRun, failover: failoverFlag, json }
} satisfies Doc

export const resume = {
  name: "resume",
  summary: "continue an open goal with its recorded settings",
  usage: ["[flags] <goal-id>"],
  description:
    "Continues a goal that is suspended or was stopped by a crash. Flags override the recorded model, server, workspace, sandbox and limits; each change is recorded before the goal goes on. A terminated goal's log is closed: start a new goal. An approved call runs exactly as stored, with no new model call.",
  arg: goalId,
  settings: [...resumeSettings, "server"],
  flags: { mcpEnv: mcpEnvFlag, cluster: clusterRun, failover: failoverFlag, json }
} satisfies Doc

export const approve = {
  name: "approve",
  summary: "approve the call a goal waits on",
  usage: ["[flags] <goal-id>"],
  description: "Records the decision (ApprovalDecided); it runs nothing: rx resume then runs the call exactly as requested.",
  arg: goalId,
  settings: ["db", "server"],
  flags: { call: callFlag, by: byFlag }
} satisfies Doc

export const deny = {
  name: "deny",
  summary: "deny the call a goal waits on",
  usage: ["[flags] <goal-id>"],
  description: "Records the decision with the reason, which the model is told at rx resume; the goal goes on without the call.",
  arg: goalId,
  settings: ["db", "server"],
  flags: { call: callFlag, by: byFlag, reason: value("reason", "TEXT", "why, as the model is told") }
} satisfies Doc

export const replay = {
  name: "replay",
  summary: "verify a goal's log by replaying it, with no live calls",
  usage: ["[flags] <goal-id>"],
  description: `Exit 0 when the log replays identically (an open goal's log as far as it goes), exit ${ExitCode.diverged} naming the first divergence.`,
  arg: goalId,
  settings: ["db", "server"],
  flags: { json: toggle("json", "the verdict as one JSON object") }
} satisfies Doc

export const inspect = {
  name: "inspect",
  summary: "the goal, each step, the tool trace and the termination audit",
  usage: ["[flags] <goal-id>"],
  description: "Everything the log says of a goal, for a person. rx events prints the events themselves.",
  arg: goalId,
  settings: ["db", "server"],
  flags: { step: count("step", "N", "show one step in full", 1, Number.MAX_SAFE_INTEGER), json: toggle("json", "the goal (or its step) as one JSON object: status, usage, and each step's calls with their input and outcome") }
} satisfies Doc

export const events = {
  name: "events",
  summary: "print a goal's events as JSON lines",
  usage: ["[flags] <goal-id>"],
  description: `With --follow, keeps printing events as they are appended until the goal terminates. When no rx runs the goal any more (its runner stopped or was killed), it says so on stderr and exits ${ExitCode.suspended}, or with --wait keeps waiting for a resume.`,
  arg: goalId,
  settings: ["db", "server"],
  flags: { follow: toggle("follow", "keep printing events as they are appended"), wait: toggle("wait", "with --follow: keep waiting when no rx runs the goal") }
} satisfies Doc

export const list = {
  name: "list",
  summary: "the goals in the database, newest first",
  usage: ["[flags]"],
  description: "Each goal's status: running, waiting(approval|sub-goal|outage), idle(why: nothing runs it; rx resume continues it) or terminated(why), its iterations, start and end.",
  settings: ["db", "server"],
  flags: { json: toggle("json", "one JSON object per goal") }
} satisfies Doc

export const cancel = {
  name: "cancel",
  summary: "ask a running goal to stop",
  usage: ["[flags] <goal-id>"],
  description: "Recorded as CancelRequested: the goal stops within one step (a goal no process runs is cancelled when resumed).",
  arg: goalId,
  settings: ["db", "server"],
  flags: {}
} satisfies Doc

export const say = {
  name: "say",
  summary: "tell a running goal something",
  usage: ["[flags] <goal-id> \"<text>\""],
  description: "Recorded as MessageSent (who, when, what): the model reads it at its next request, once, as your message; a call in flight runs on. A suspended goal reads it when resumed; a goal that has ended is refused (rx run --continue starts a new goal from it).",
  arg: goalId,
  more: { name: "text", description: "the message, in quotes" },
  settings: ["db", "server"],
  flags: {}
} satisfies Doc

export const doctor = {
  name: "doctor",
  summary: "check the database, read-only",
  usage: ["[flags]"],
  description: `SQLite's integrity check, every goal's log (seqs, Terminated, events that do not decode), the goal summaries, stale leases. Exit ${ExitCode.unhealthy} on problems; nothing is repaired.`,
  settings: ["db"],
  flags: { json: toggle("json", "the report as one JSON object") }
} satisfies Doc

export const config = {
  name: "config",
  summary: "the settings rx run would use here, and where each comes from",
  usage: ["[flags]"],
  description: [
    `Each setting comes from the first of: its flag, its RX_ variable, the workspace's ${Settings.workspaceFile}, your config file (${"$XDG_CONFIG_HOME/rx/config.json, or ~/.config/rx/config.json"}), the default. On rx resume, what the goal recorded comes before the config files.`,
    `A config file is a JSON object of settings by their camelCase names, e.g. {"model": "qwen2.5-coder:7b", "maxIterations": 30, "ask": ["shell"]}. The workspace's file cannot set the sandbox, the http allow-list, the base URL or an instructions file (a repository could have written it), and the agent cannot change it: the tools may read it, never write it.`,
    `Your own config file may also hold ${"\"mcpServers\""}: the settings of each MCP server by the name --mcp gives it, e.g. {"mcpServers": {"fs": {"startTimeout": 120}, "api": {"env": {"API_KEY": "..."}, "sandbox": {"network": true, "read": ["~/tools/api"]}, "safeToRepeat": true}}}: variables for it, seconds it may take to start, to run it in bubblewrap (with the network, and folders it may read), and that its tools may run again when a crash cut a call (its own readOnlyHint or idempotentHint is not trusted for that).`
  ].join("\n\n"),
  settings: runSettings,
  flags: { json: toggle("json", "the settings as one JSON object") }
} satisfies Doc

export const serve = {
  name: "serve",
  summary: "run goals for HTTP clients: the rx API on this machine",
  usage: ["[flags]"],
  description: [
    "Serves the rx HTTP API (POST /v1/goals, GET /v1/goals/{id}/events as JSON lines or server-sent events, cancel, approvals, resume; GET /openapi.json) and a web inspector at its URL. Goals run with this command's model and tools, each in a folder inside --workspace; at start every open goal that does not wait for a person is resumed. SIGTERM or Ctrl-C drains: runs stop, their goals stay open and recorded.",
    "Every route but /healthz needs the bearer token: RX_TOKEN, or the one in the token file next to the database (rx-server.token, 0600, its path printed), kept across restarts; the first start, or --new-token, writes a new one. The tools never see that file nor reach this server. The other commands talk to the server with --server URL (or RX_SERVER), reading that file for a server on this machine."
  ].join("\n\n"),
  settings: Settings.serveKeys,
  flags: {
    host: value("host", "ADDR", "the address to listen on (default 127.0.0.1: this machine only)"),
    allowRemote: toggle("allow-remote", "allow a --host other machines can reach (then put TLS in front)"),
    port: count("port", "N", "the port (default 7433; 0 picks a free one)", 0, 65_535),
    concurrency: count("concurrency", "N", "goals run at once; more wait in order (default 4)", 1, 1_000),
    cluster: toggle("cluster", "run no goal here: hand each to the workers (rx worker) of the Postgres log --db names; no model is needed"),
    newToken: toggle("new-token", "write a new token file instead of keeping the last one (clients holding the old token are refused)"),
    failover: failoverFlag,
    mcp: mcpFlag,
    mcpEnv: mcpEnvFlag,
    mcpSandbox: mcpSandboxFlag
  }
} satisfies Doc

export const worker = {
  name: "worker",
  summary: "run the goals of a cluster: a worker on a Postgres log",
  usage: ["--db postgres://USER:PASSWORD@HOST/DB --port N [flags]"],
  description: [
    "Joins the workers that share the Postgres log of --db (@effect/cluster): goals submitted with rx serve --cluster are spread over them, each run with this worker's model and tools in the goal's recorded workspace, and the goals of a worker that dies go on on the others after --failover seconds (an interrupted call that is not idempotent is recorded unknown, never run twice).",
    `Workspaces: every worker, and the rx serve --cluster that submits, must see the same workspace root (--workspace) at the same path: one volume mounted on every host, or all on one machine. The root holds the volume's id (${"`.rx-volume`"}, made once, hidden from the tools); a goal records it with its workspace, and a worker whose root has another id (the volume is not mounted there) refuses the goal and runs none of its tools.`,
    "Workers talk to each other at --host:--port without authentication: keep them on a private network. SIGTERM or Ctrl-C drains the worker: the goals it runs have --drain seconds to end; those still running are then stopped, recorded, and go on on the other workers."
  ].join("\n\n"),
  settings: Settings.workerKeys,
  flags: {
    host: value("host", "ADDR", "the address the other workers reach this one at, where it listens (default 127.0.0.1: one machine)"),
    allowRemote: toggle("allow-remote", "allow a --host other machines can reach"),
    port: count("port", "N", "the port it listens on (required: each worker of a machine has its own)", 1, 65_535),
    concurrency: count("concurrency", "N", "goals run at once on this worker (default 4)", 1, 1_000),
    failover: failoverFlag,
    drain: count("drain", "SECONDS", "when stopped, how long its running goals may go on before they are stopped and go on elsewhere (default 15)", 0, 3_600)
  }
} satisfies Doc

export const fork = {
  name: "fork",
  summary: "a new goal that starts with a goal's steps up to step N, then goes on live",
  usage: ["[flags] <goal-id> --at N"],
  description:
    "Copies the goal's events up to the end of step N into a new goal (its first event names the goal and step it was forked from; the old log is never written), then goes on live as rx resume does, with any flag changed: the model, the limits, the workspace, --instructions. Nothing of the first N steps runs again. It runs in the old goal's workspace unless --workspace names another; either way its files are as they are now, not as they were at step N. rx list and rx inspect show the forks of a goal.",
  arg: goalId,
  settings: [...resumeSettings, "instructions"],
  flags: { at: count("at", "N", "the last step of the goal the fork keeps (required)", 1, Number.MAX_SAFE_INTEGER), mcpEnv: mcpEnvFlag, json }
} satisfies Doc

export const evaluate = {
  name: "eval",
  summary: "ask each recorded model decision again of another model, and compare; no tool runs",
  usage: ["[flags] [goal-id...]"],
  description: [
    "Rebuilds every request the goals' model received from the log, exactly (with other instructions if --instructions names a file), asks the model of --model (--base-url) or --model-file, decodes its answer as a run does, and compares it with the recorded decision: same (the same calls: tools and input), same_tools (other input), other_tools, no_action (no valid call), failed (the request failed; the others go on). No tool runs: the recorded results stand in. A call a person approved or denied is marked. Without goal ids, every terminated goal of the log.",
    `Prints a table per goal and a summary (agreement, tokens, time per request); progress on stderr. With --min-agreement X, exit ${ExitCode.belowAgreement} when the share of same decisions is below X.`
  ].join("\n\n"),
  arg: { name: "goal-id", description: "the goals to evaluate, as rx list shows them (default: every terminated goal)", optional: true, repeated: true },
  settings: Settings.evalKeys,
  flags: {
    concurrency: count("concurrency", "N", "requests in flight at once (default 1)", 1, 256),
    json: toggle("json", "the comparison as one JSON object (per goal, per step, and the summary), for CI")
  }
} satisfies Doc

export const demo = {
  name: "demo",
  summary: "a complete goal with a scripted model, real tools and a real SQLite log",
  usage: ["[flags]"],
  description: "Runs a goal in a temporary folder with a model whose answers are written in advance, then inspects and replays it. The folder is removed afterwards unless --keep.",
  settings: [],
  flags: { keep: toggle("keep", "keep the demo's folder (workspace and log) and say where it is"), json: toggle("json", "print only the goal's events, as JSON lines") }
} satisfies Doc

/** Every command, in the order `rx --help` lists them. */
export const docs: Arr.NonEmptyReadonlyArray<Doc> = [run, resume, approve, deny, replay, inspect, events, list, cancel, say, doctor, fork, evaluate, config, serve, worker, demo]

/** The declaration of a command. */
export const doc = (name: string): Doc | undefined => docs.find((d) => d.name === name)

const wrap = (text: string, width: number, indent: string): string =>
  text.split("\n").map((paragraph) => {
    const lines: Array<string> = []
    let line = ""
    for (const word of paragraph.split(" ")) {
      if (line !== "" && line.length + 1 + word.length > width) {
        lines.push(line)
        line = word
      } else line = line === "" ? word : `${line} ${word}`
    }
    lines.push(line)
    return lines.map((l) => (l === "" ? "" : `${indent}${l}`)).join("\n")
  }).join("\n")

/** How help is shown: headings in bold on a terminal that allows colour, plain otherwise. */
export interface Style {
  readonly bold: boolean
}

const heading = (text: string, style: Style) => (style.bold ? `\u001b[1m${text}\u001b[0m` : text)

/** A flag as a row of the help: `--name PLACEHOLDER`, its description. */
const row = (f: FlagDoc) => [`--${f.flag}${f.placeholder === "" ? "" : ` ${f.placeholder}`}`, f.description] as const

/** Two columns within 80 characters; `width` is the left one's (a longer entry gets a line of its own). */
const rows = (entries: ReadonlyArray<readonly [string, string]>, width = Math.min(28, Math.max(...entries.map(([left]) => left.length)) + 2)) =>
  entries.map(([left, right]) => {
    const text = wrap(right, 78 - width - 2, " ".repeat(width + 2))
    return left.length + 2 > width ? `  ${left}\n${text}` : `  ${left.padEnd(width)}${text.trimStart()}`
  }).join("\n")

const groups: ReadonlyArray<readonly [string, ReadonlyArray<Settings.Key>]> = [["model", model], ["limits", limits], ["tools", tools], ["MCP servers", mcp], ["log", ["db"]], ["server", ["server"]], ["gate", ["minAgreement"]]]

/** `rx <command> --help`. */
export const commandHelp = (s: Doc, style: Style): string => {
  const settingGroups = groups
    .map(([title, keys]) => [title, keys.filter((key) => s.settings.includes(key))] as const)
    .filter(([, keys]) => keys.length > 0)
  const width = Math.min(28, Math.max(8, ...accepted(s).map((f) => row(f)[0].length)) + 2)
  return [
    `rx ${s.name}: ${s.summary}`,
    "",
    heading("usage", style),
    ...s.usage.map((u) => `  rx ${s.name} ${u}`),
    "",
    wrap(s.description, 76, ""),
    ...settingGroups.flatMap(([title, keys]) => ["", heading(title, style), rows(keys.map((key) => row(settingDoc(key))), width)]),
    "",
    heading("flags", style),
    rows([...Object.values(s.flags).map(row), ["--help", "this help"]], width)
  ].join("\n")
}

/** `rx --help`. */
export const help = (style: Style): string =>
  [
    `rx ${version}: an autonomous agent kernel: goals in, a recorded log of every step out.`,
    "",
    heading("usage", style),
    "  rx <command> [flags]      rx <command> --help shows its flags",
    "",
    heading("commands", style),
    rows(docs.map((s) => [s.name, s.summary] as const)),
    "",
    heading("the log", style),
    wrap(`--db, else RX_DB, else ${Settings.defaultDbText}: per user, outside the agent's workspace (a log placed inside the workspace is hidden from the tools). Every command finds it there. A postgres:// URL names a Postgres log instead, which many machines share (rx worker).`, 76, "  "),
    "",
    heading("settings", style),
    wrap(`flag > RX_ variable > the workspace's ${Settings.workspaceFile} > ~/.config/rx/config.json > default; rx config shows each value and where it came from.`, 76, "  "),
    "",
    heading("while a goal runs", style),
    wrap("Ctrl-C cancels it (recorded, exit 7; a second Ctrl-C stops at once, exit 130); SIGTERM, or SIGHUP (the terminal closed), stops it gracefully and leaves it open (exit 11). RX_DEBUG=1 adds the details of an error.", 76, "  "),
    "",
    heading("exit codes", style),
    ExitCode.table.split("\n").map((line) => `  ${line}`).join("\n")
  ].join("\n")
