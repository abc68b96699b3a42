# moto's S3 server for the tests, benchmarks and CI scripts: `python moto_server.py PORT`
# serves on 127.0.0.1:PORT, prints "ready", and stops when its standard input closes.
#
# moto checks a conditional create (`If-None-Match: *`, on PUT and on completing a multipart
# upload) and then stores, two steps its threads can interleave: two writers racing for one key
# could both be told they created it, which S3 never does (trove's record log relies on exactly
# that answer, as restic's and rustic's locks do). The two handlers run one at a time here, so
# the conditional create is atomic, as S3's is.
import os
import sys
import threading

from moto.s3 import responses
from moto.server import ThreadedMotoServer

_creates = threading.Lock()


def _one_at_a_time(handler):
    def serialized(*args, **kwargs):
        with _creates:
            return handler(*args, **kwargs)

    return serialized


responses.S3Response.put_object = _one_at_a_time(responses.S3Response.put_object)
responses.S3Response._key_response_post = _one_at_a_time(responses.S3Response._key_response_post)

server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()
os._exit(0)
