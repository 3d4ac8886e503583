"""Triton Python-backend model `<name>_tokenize`: texts in, a text model's inputs out.

Published by `modelship publish` as `<version>/model.py`, beside the export's `tokenizer.json`, `tokenizer_spec.json`
(its truncation and padding) and a copy of modelship's tokenizer module (`modelship/`), so the server tokenizes with
the same code as the client and the parity engine (the `tokenizers` library; no torch, no transformers). Input
`TEXT` (TYPE_STRING, one UTF-8 text per batch row); outputs the model's text inputs (`input_ids`, `attention_mask`,
`token_type_ids` where the model takes them), INT64. Each request's texts are tokenized together and padded to
their longest; a request whose text is not UTF-8 fails alone.
"""

import json
from pathlib import Path

import triton_python_backend_utils as pb_utils

from modelship.contract.errors import PreprocessError
from modelship.contract.tokenizer import TokenizerSpec
from modelship.preprocess.tokenizer import TextTokenizer, decode_texts


class TritonPythonModel:
    def initialize(self, args):
        here = Path(__file__).parent
        self.spec = TokenizerSpec.from_dict(json.loads((here / "tokenizer_spec.json").read_text()))
        self.tokenizer = TextTokenizer(here / self.spec.file, self.spec)

    def execute(self, requests):
        return [self._respond(request) for request in requests]

    def _respond(self, request):
        try:
            values = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            if values.size == 0:
                raise PreprocessError("TEXT holds no texts")
            encoded = self.tokenizer.encode(decode_texts(list(values)))
        except PreprocessError as exc:
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(f"tokenize: {exc}"))
        return pb_utils.InferenceResponse([pb_utils.Tensor(name, array) for name, array in encoded.items()])
