/**
 * `rx config`: the settings `rx run` would use here, and where each comes from.
 */
import * as Settings from "@rx/host/Settings"
import * as Setup from "@rx/host/Setup"
import { Sandbox } from "@rx/tools"
import { Console, Effect, Option } from "effect"
import type * as Usage from "../Usage.js"
import * as Render from "../Render.js"
import { say } from "./goal.js"

/** A value as `rx config` shows it: the key never, nor a base URL's user and password. */
const showValue = (key: Settings.Key, value: Settings.Value) =>
  key === "apiKey"
    ? "(set)"
    : Array.isArray(value)
    ? value.join(",")
    : key === "baseUrl" || key === "server"
    ? Settings.redactUserinfo(String(value))
    : String(value)

/** What sandbox mode `auto` means for a workspace on this machine: the shell in bubblewrap, or no shell offered (and why). */
export const sandboxHere = (workspace: string) =>
  Effect.map(Sandbox.resolve("auto", workspace), (found) =>
    found._tag === "Bwrap"
      ? { sandbox: "bwrap", line: `sandbox auto here: bubblewrap (${found.path}), so shell runs sandboxed` }
      : { sandbox: "unavailable", line: `sandbox auto here: bubblewrap cannot be used, so shell is not offered (${found._tag === "Unavailable" ? found.reason : "no sandbox"}); --sandbox none offers it unsandboxed` })

export const config = (flags: Usage.Input<typeof Usage.config>) =>
  Effect.gen(function*() {
    const db = yield* Settings.database(Settings.dbFlag(flags.settings))
    const resolved = yield* Setup.resolve(flags.settings, Settings.runKeys)
    const entries = Settings.runKeys.map((key) => {
      if (key === "db") return { key, value: db.label, from: db.source === "env" ? "env RX_DB" : db.source }
      const found = resolved.found[key]
      const s: Settings.Doc = Settings.table[key]
      // A default is shown as the value it gives; a setting with none is unset.
      return found === undefined
        ? { key, value: s.shownDefault ?? null, from: s.shownDefault === undefined ? "unset" : "default" }
        : { key, value: showValue(key, found.value), from: Settings.describeSource(found.source) }
    })
    // What `auto` means on this machine: the shell in bubblewrap, or no shell offered (and why).
    const mode = resolved.values.sandbox ?? "auto"
    const here = mode !== "auto" ? undefined : yield* sandboxHere(resolved.workspace)
    if (flags.json) {
      return yield* Console.log(Render.jsonLine(JSON.stringify({
        files: resolved.files.map(({ file, found }) => ({ file, found: Option.isSome(found) })),
        settings: Object.fromEntries(entries.map(({ from, key, value }) => [key, key === "sandbox" && here !== undefined ? { value, from, here: here.sandbox } : { value, from }]))
      })))
    }
    const width = Math.max(...entries.map((e) => e.key.length)) + 2
    // As wide as the longest value (a long path past 60 characters only pushes its own line out).
    const valueWidth = Math.min(60, Math.max(...entries.map((e) => (e.value ?? "-").length))) + 2
    yield* say([
      "config files, nearest first:",
      ...resolved.files.map(({ file, found }) => `  ${file}${Option.isSome(found) ? "" : " (none)"}`),
      "",
      `${"setting".padEnd(width)}${"value".padEnd(valueWidth)}from`,
      ...entries.map(({ from, key, value }) => `${key.padEnd(width)}${(value ?? "-").padEnd(valueWidth - 1)} ${from}`),
      ...(here === undefined ? [] : ["", here.line])
    ].join("\n"))
  })

