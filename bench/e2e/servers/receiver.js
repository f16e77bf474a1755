// The OTLP/HTTP collector of (ct): takes every export, reads it whole and answers 200 as a collector
// does, decoding nothing (its CPU is not the gateway's, and the table does not count it).
import { createServer } from 'node:http'
import { serve } from './child.js'

await serve(
  createServer((req, res) => {
    req.on('data', () => {})
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 }).end())
  }),
)
