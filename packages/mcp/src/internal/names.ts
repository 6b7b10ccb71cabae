/** A server's tool as rx names it: `NAME__tool`, within 64 letters, digits, "_" and "-". */
import { createHash } from "node:crypto"

export const separator = "__"

export const rxName = (server: string, tool: string): string => {
  const clean = tool.replace(/[^a-zA-Z0-9_-]/g, "_")
  const name = `${server}${separator}${clean}`
  if (name.length <= 64 && clean === tool) return name
  // Changed or too long: a short hash of the original keeps two tools apart.
  const hash = createHash("sha256").update(tool).digest("hex").slice(0, 6)
  return `${name.slice(0, 57)}_${hash}`
}
