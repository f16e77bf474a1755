import type { Writable } from 'node:stream'
import { maskCardNumbers } from '../card-mask.js'
import { EXIT_USAGE } from './io.js'

/**
 * The process's stdout and stderr watched for a refusal of a command's output (a full disk, an I/O error). On
 * stdout: one line on stderr and exit code 2 (docs/cli.md, exit codes), where node would print the stack of an
 * unhandled error; a reader that left (EPIPE: `payments-gate openapi | head`) is not the command's failure: its own
 * code stands. On stderr there is nowhere left to tell it: the command's own code stands too.
 */
export function watchOutput(stdout: Writable, stderr: Writable): void {
  stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') return
    stderr.write(`payments-gate: stdout: ${error.message}\n`)
    // Set here: node reports a failed write a tick after it, which may be after the command's code was taken.
    process.exitCode = EXIT_USAGE
  })
  stderr.on('error', () => undefined)
}

/**
 * A line of a command's report, ended: one line whatever `text` holds (node's JSON errors quote the input, its line
 * breaks included), its card numbers masked as the log's are; a file's name and content are an operator's text
 * (docs/cli.md).
 */
export function reportLine(text: string): string {
  return `${maskCardNumbers(text.replaceAll('\r', '\\r').replaceAll('\n', '\\n'))}\n`
}
