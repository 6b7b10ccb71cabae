/**
 * The MCP stdio transport over a process tree rx started (`ProcessTree.spawn`): newline-delimited
 * JSON-RPC on the program's stdin and stdout, as the SDK's own stdio transport speaks it. The
 * tree's scope, not this transport, stops the program and what it started.
 */
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import type { ProcessTree } from "@rx/tools"

export class TreeTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined
  private readonly buffer = new ReadBuffer()
  private closed = false

  constructor(private readonly tree: ProcessTree.Tree) {}

  start(): Promise<void> {
    const { child } = this.tree
    child.stdout.on("data", (chunk: Buffer) => {
      try {
        this.buffer.append(chunk)
      } catch (error) {
        // A message past the buffer's bound: the connection cannot go on.
        this.onerror?.(error instanceof Error ? error : new Error(String(error)))
        void this.close()
        return
      }
      for (;;) {
        let message: JSONRPCMessage | null
        try {
          message = this.buffer.readMessage()
        } catch (error) {
          this.onerror?.(error instanceof Error ? error : new Error(String(error)))
          continue
        }
        if (message === null) break
        this.onmessage?.(message)
      }
    })
    child.stdout.on("error", (error) => this.onerror?.(error))
    child.once("close", () => void this.close())
    if (this.tree.exited()) void this.close()
    return Promise.resolve()
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.tree.child.stdin
    if (this.closed || stdin.destroyed || !stdin.writable) return Promise.reject(new Error("Not connected"))
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve()
      else stdin.once("drain", () => resolve())
    })
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true
      this.buffer.clear()
      this.tree.child.stdin.end()
      this.onclose?.()
    }
    return Promise.resolve()
  }
}
