/**
 * Notes a sandboxed shell call leaves outside the workspace while it runs: which protected paths
 * were missing when it started, so that a later rx, resuming after a crash during the call, moves
 * aside what the call created there (`Sandbox.moveAside`). They live in a folder of rx's user
 * under the system's temp folder (mode 700); a note is removed when its call ends.
 */
import { lstatSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as NodePath from "node:path"

export interface Note {
  readonly root: string
  readonly identity: { readonly dev: string; readonly ino: string }
  readonly missing: ReadonlyArray<string>
}

/** The notes' folder, made if missing; undefined when it is not rx's user's alone. Checked once while it passes. */
let checked: string | undefined
const folder = (): string | undefined => {
  if (checked !== undefined) return checked
  const dir = NodePath.join(tmpdir(), `rx-shell-${process.getuid?.() ?? "user"}`)
  try {
    mkdirSync(dir, { mode: 0o700 })
  } catch {
    // It exists: checked below.
  }
  try {
    const info = lstatSync(dir)
    const own = process.getuid === undefined || info.uid === process.getuid()
    if (info.isDirectory() && own && (info.mode & 0o077) === 0) checked = dir
    return checked
  } catch {
    return undefined
  }
}

const file = (marker: string): string | undefined => {
  const dir = folder()
  return dir === undefined ? undefined : NodePath.join(dir, `${marker}.json`)
}

export const write = (marker: string, note: Note): void => {
  // Twice at most: the folder may have been cleaned out of the temp folder since it was checked.
  for (let attempt = 0; attempt < 2; attempt++) {
    const path = file(marker)
    if (path === undefined) return
    try {
      writeFileSync(path, JSON.stringify(note), { mode: 0o600 })
      return
    } catch {
      checked = undefined
    }
  }
  // Without a note, a crash during the call leaves what it created; the call itself still checks.
}

export const read = (marker: string): Note | undefined => {
  const path = file(marker)
  if (path === undefined) return undefined
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, "utf8"))
    if (typeof parsed !== "object" || parsed === null) return undefined
    const { identity, missing, root } = parsed as Record<string, unknown>
    if (typeof root !== "string" || !Array.isArray(missing) || !missing.every((m) => typeof m === "string")) return undefined
    if (typeof identity !== "object" || identity === null) return undefined
    const { dev, ino } = identity as Record<string, unknown>
    if (typeof dev !== "string" || typeof ino !== "string") return undefined
    return { root, identity: { dev, ino }, missing }
  } catch {
    return undefined
  }
}

export const remove = (marker: string): void => {
  const path = file(marker)
  if (path === undefined) return
  try {
    unlinkSync(path)
  } catch {
    // Already gone.
  }
}
