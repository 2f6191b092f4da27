"""Run Extra-P 4.2.5 on one text input and print its models as JSON (run with the Extra-P venv's python).

Usage: /tmp/extrap-venv/bin/python benchmarks/extrap_run.py FILE.txt [--at JSON_POINTS]

Prints {"seconds": modeling+reading time, "models": [{region, metric, formula, terms, coefficients,
predict}]} where terms is a list of {param_index: [i, j]}, coefficients the constant followed by
each term's coefficient, and predict the model at the --at points.
This script only imports Extra-P; it is never imported by extradeep.
"""

import argparse
import json
import time
from fractions import Fraction

import numpy as np


def factor(compound):
    i, j = Fraction(0), Fraction(0)
    for simple in compound.simple_terms:
        if simple.term_type == "polynomial":
            i += Fraction(simple.exponent)
        else:
            j += Fraction(simple.exponent)
    return [str(i), str(j)]


def terms_of(function):
    out = []
    for term in function.compound_terms:
        if hasattr(term, "parameter_term_pairs"):
            out.append({str(p): factor(c) for p, c in term.parameter_term_pairs})
        else:
            out.append({"0": factor(term)})
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--at", default="[]", help="JSON list of points to evaluate every model at")
    parser.add_argument("--rss", action="store_true", help="also report peak memory (peak_kb)")
    args = parser.parse_args()
    start = time.perf_counter()
    from extrap.fileio.file_reader.text_file_reader import TextFileReader
    from extrap.modelers.model_generator import ModelGenerator

    experiment = TextFileReader().read_experiment(args.file)
    generator = ModelGenerator(experiment)
    generator.model_all()
    seconds = time.perf_counter() - start
    at = np.asarray(json.loads(args.at), dtype=float)
    n_params = len(experiment.parameters)
    models = []
    for (callpath, metric), model in generator.models.items():
        function = model.hypothesis.function
        if len(at):
            values = function.evaluate(at[:, 0] if n_params == 1 else at.T)
            predict = np.broadcast_to(values, (len(at),)).tolist()
        else:
            predict = []
        coefficients = [float(function.constant_coefficient)] + [float(t.coefficient) for t in function.compound_terms]
        models.append(
            {
                "region": callpath.name,
                "metric": metric.name,
                "formula": str(function),
                "terms": terms_of(function),
                "coefficients": coefficients,
                "predict": predict,
            }
        )
    result = {"seconds": seconds, "models": models}
    if args.rss:
        import resource

        result["peak_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))


if __name__ == "__main__":
    main()
