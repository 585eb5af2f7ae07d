"""Pictures of the geometry, drawn with matplotlib from galinear's own multivectors.

* :mod:`galinear.plot.pga`: PGA points, lines, planes and the path of a motor (2D and 3D);
* :mod:`galinear.plot.cga`: CGA points, point pairs, circles, spheres, lines, planes and their meets;
* :mod:`galinear.plot.sta`: a boost of the light cone in the spacetime algebra;
* :mod:`galinear.plot.rotors`: the invariant planes and angles of rotors and rotor layers;
* :mod:`galinear.plot.results`: committed Markdown tables and JSON results, read for figures.

Every drawing function takes ``ax=None`` (a new figure's axes are made when None) and returns the
axes, so pictures compose and work in a notebook and offline (any matplotlib backend). The
extraction helpers (coordinates, centres, radii, planes) need numpy only. matplotlib is imported
when a picture is drawn; without it the call raises an ImportError naming
``pip install 'galinear[plot]'``. ``import galinear`` never imports this package.
"""
from galinear.plot import cga, pga, results, rotors, sta
from galinear.plot._mpl import INSTALL_HINT
from galinear.plot.cga import draw as draw_cga
from galinear.plot.pga import draw as draw_pga
from galinear.plot.pga import draw_motor_path
from galinear.plot.rotors import draw_bivector_matrix, draw_rotor_angles, draw_rotor_planes
from galinear.plot.sta import draw_boost_diagram, draw_light_cone_boost

__all__ = ["pga", "cga", "sta", "rotors", "results", "draw_pga", "draw_motor_path", "draw_cga", "draw_light_cone_boost",
           "draw_boost_diagram", "draw_rotor_angles", "draw_rotor_planes", "draw_bivector_matrix", "INSTALL_HINT"]
