// The shared suite against the Worker, in miniflare (workerd with R2 and Durable Objects).
import { suite } from "./suite.mjs";
import { startWorker } from "./targets.mjs";

suite("Cloudflare Worker (miniflare)", startWorker);
